#!/usr/bin/env bash
# Posts a gpuq event to a chat webhook (Slack, Mattermost and Rocket.Chat take this
# shape). Use: GPUQ_WEBHOOK_URL=https://... gpuq run --plan plan.json \
#   --on-event 'failed,timeout,lost:examples/hooks/chat-webhook.sh'
# The event is in GPUQ_* variables (and as JSON on stdin). Not run by the tests.
set -euo pipefail
: "${GPUQ_WEBHOOK_URL:?set GPUQ_WEBHOOK_URL to your chat's incoming-webhook address}"
host=$(hostname -s)
what="$GPUQ_EVENT"
[ -n "${GPUQ_OUTCOME:-}" ] && what="$GPUQ_OUTCOME"
text="gpuq on $host: $GPUQ_JOB_ID (attempt $GPUQ_ATTEMPT) $what${GPUQ_EXIT:+, exit $GPUQ_EXIT}; log: $GPUQ_LOG"
# The text as a JSON string, without jq: escape backslashes and quotes.
esc=${text//\\/\\\\}
esc=${esc//\"/\\\"}
curl -fsS --max-time 20 -H 'Content-Type: application/json' -d "{\"text\": \"$esc\"}" "$GPUQ_WEBHOOK_URL"
