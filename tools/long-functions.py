#!/usr/bin/env python3
"""The functions of src/ and include/ longer than a limit (default 80 lines), longest first.

Usage: python3 tools/long-functions.py [LIMIT]   (run from the repository root)
A heuristic, not a parser: a line at the left margin (or two spaces in) that names a function
and opens a brace within 8 lines starts one, and it ends where its braces balance (strings and
comments left out). Lambdas and local classes count as part of the function that holds them.
issue 49 measures "no function over about 80 lines" with it."""
import re,sys,glob
limit=int(sys.argv[1]) if len(sys.argv)>1 else 80
res=[]
for f in sorted(glob.glob('src/*/*.cpp')+glob.glob('include/gpuq/*/*.h')):
    lines=open(f).read().split('\n')
    i=0
    while i<len(lines):
        l=lines[i]
        m=re.match(r'^(\s{0,2})[A-Za-z_][\w:<>,\*&\s~]*\s*[\w:~]+\(.*',l)
        if m and not l.strip().startswith(('if','for','while','switch','return','//','#','case','else')) and ';' not in l.split('//')[0].rstrip()[-1:]:
            # find opening brace within next 6 lines
            j=i; found=False
            while j<len(lines) and j<i+8:
                if '{' in lines[j]: found=True;break
                if lines[j].rstrip().endswith(';'): break
                j+=1
            if found:
                depth=0;k=j;started=False
                while k<len(lines):
                    code=re.sub(r'"(\\.|[^"\\])*"','""',lines[k].split('//')[0])
                    code=re.sub(r"'(\\.|[^'\\])'","''",code)
                    depth+=code.count('{')-code.count('}')
                    if code.count('{'): started=True
                    if started and depth<=0: break
                    k+=1
                n=k-i+1
                if n>limit: res.append((n,f,i+1,l.strip()[:80]))
                i=k+1; continue
        i+=1
for r in sorted(res,reverse=True): print(*r)
print(len(res),f'functions over {limit} lines')
