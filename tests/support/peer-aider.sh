#!/usr/bin/env bash
# Aider (PyPI `aider-chat`) as the peer of `abhed eval --peer` (docs/EVAL.md, "Side by side with
# a peer"): run in the task's workspace with the task from $ABHED_TASK, against an
# OpenAI-compatible server (llama-server with the same GGUF Abhed runs in-process). Prints only
# the model's own words on stdout, which is what the suite's answer regexes are matched against;
# Aider's console goes to stderr.
#
#   AIDER=/path/to/aider ABHED_PEER_ENDPOINT=http://127.0.0.1:8090/v1 \
#     abhed eval --peer "bash $PWD/tests/support/peer-aider.sh" --model models/X.gguf
set -uo pipefail
aider=${AIDER:-aider}
base=${ABHED_PEER_ENDPOINT:?set ABHED_PEER_ENDPOINT to the base URL of the server, e.g. http://127.0.0.1:8090/v1}
meta=$(mktemp -d)
trap 'rm -rf "$meta"' EXIT

# Aider's repository map needs git: a throwaway repository, removed afterwards with Aider's
# cache, so the check sees the task's tree and nothing of Aider's bookkeeping.
git init -q . && git add -A && git -c user.name=peer -c user.email=peer@localhost commit -qm start --allow-empty
cleanup() { rm -rf .git .aider.tags.cache.v*; }

# Stop a little before the suite's limit, so the cleanup runs (the suite kills at the limit).
limit=$(( ${ABHED_TASK_TIMEOUT_S:-900} - 10 ))
# Offline: no update check, no analytics, no model-price download, no pretty terminal.
export LITELLM_LOCAL_MODEL_COST_MAP=True AIDER_ANALYTICS=false
timeout --kill-after=5 "$limit" "$aider" \
  --model openai/local --openai-api-base "$base" --openai-api-key none \
  --yes-always --no-auto-commits --no-dirty-commits --no-gitignore \
  --no-check-update --analytics-disable --no-show-model-warnings --no-pretty --no-stream \
  --chat-history-file "$meta/chat.md" --input-history-file "$meta/input" \
  --llm-history-file "$meta/llm.txt" \
  --message "$ABHED_TASK" </dev/null >&2
rc=$?
cleanup

# The model's words: the chat history without the operator's lines (`#### `), Aider's own
# notes (`> `) and the session headers.
python3 - "$meta/chat.md" <<'PY'
import sys
try:
    lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
except FileNotFoundError:
    sys.exit(0)
out = [l for l in lines if not l.startswith(("#### ", "> ", "# aider chat started")) and l.strip() != ">"]
print("\n".join(out).strip())
PY
exit $rc
