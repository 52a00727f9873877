#!/usr/bin/env bash
# The five-minute walk-through: onboard a signal source on a running gateway and push
# signed signals to it, checking every answer.
#
#   examples/walkthrough.sh
#
# Reads from the environment:
#   GATEWAY_URL   the gateway (default http://127.0.0.1:8080, where `npm start` listens)
#   ADMIN_TOKEN   its admin token (default: the one `npm start` generated into ./data/admin-token)
#   KEEP_WORKDIR  set to 1 to keep the work folder (the source's private key, the bodies
#                 and signing strings) instead of removing it on exit
#
# Needs bash, curl, jq 1.6 or later and OpenSSL 3 (for Ed25519 signing with `pkeyutl -rawin`).
# Each run makes its own creator, agent and source, so it can run any number of times
# on the same gateway. A step whose answer is not the one expected prints the status and
# the error body, and the script stops with a non-zero exit code.
set -euo pipefail

REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GATEWAY_URL=${GATEWAY_URL:-http://127.0.0.1:8080}
GATEWAY_URL=${GATEWAY_URL%/}

fail() {
  printf 'walkthrough: %s\n' "$*" >&2
  exit 1
}

# --- Tools --------------------------------------------------------------------------
for tool in curl jq openssl; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed (needed: curl, jq 1.6 or later, OpenSSL 3)"
done
jq_version=$(jq --version 2>&1 || true)
# jq-1.6, jq-1.7.1, ...: --rawfile and -j need 1.6.
[[ $jq_version =~ ^jq-([0-9]+)\.([0-9]+) ]] || fail "cannot read the jq version from '$jq_version' (needed: jq 1.6 or later)"
if ((BASH_REMATCH[1] < 1 || (BASH_REMATCH[1] == 1 && BASH_REMATCH[2] < 6))); then
  fail "$jq_version is too old: jq 1.6 or later is needed"
fi
openssl_version=$(openssl version 2>&1 || true)
# LibreSSL (macOS's /usr/bin/openssl) and OpenSSL 1.1 cannot sign raw input with Ed25519.
[[ $openssl_version =~ ^OpenSSL\ ([3-9]|[1-9][0-9])\. ]] || fail "'$openssl_version' is not OpenSSL 3 or later (on macOS: brew install openssl@3 and put it first on PATH)"

if [[ -z ${ADMIN_TOKEN:-} ]]; then
  token_file="$REPO_DIR/data/admin-token"
  [[ -r $token_file ]] || fail "ADMIN_TOKEN is not set and $token_file does not exist: set ADMIN_TOKEN to the gateway's admin token"
  ADMIN_TOKEN=$(tr -d '[:space:]' <"$token_file")
fi

# --- Work folder: the private key and every working file stay out of the repository ----
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sgw-walkthrough.XXXXXX")
if [[ ${KEEP_WORKDIR:-} == 1 ]]; then
  trap 'printf "work folder kept: %s\n" "$WORK"' EXIT
else
  trap 'rm -rf "$WORK"' EXIT
fi
RUN=$(openssl rand -hex 4)

# call STEP EXPECTED_STATUS CURL_ARGS...: one request; its body is left in $WORK/answer.json.
# Any other status (or no answer at all) prints the step, the status and the body, and stops.
call() {
  local step=$1 expected=$2 status
  shift 2
  if ! status=$(curl -sS -o "$WORK/answer.json" -w '%{http_code}' "$@"); then
    fail "$step: no answer from $GATEWAY_URL (is the gateway running? start it with: npm start)"
  fi
  if [[ $status != "$expected" ]]; then
    printf 'walkthrough: %s: expected HTTP %s, got %s:\n' "$step" "$expected" "$status" >&2
    jq . "$WORK/answer.json" >&2 2>/dev/null || cat "$WORK/answer.json" >&2
    exit 1
  fi
}
# answer FILTER: a field of the last answer; a missing one stops the script.
answer() {
  jq -er "$1" "$WORK/answer.json" || fail "the answer has no $1: $(cat "$WORK/answer.json")"
}
# expect_code STEP CODE: the last answer is the refusal with that error code.
expect_code() {
  [[ $(jq -r '.error.code' "$WORK/answer.json") == "$2" ]] || fail "$1: expected error code $2, got $(cat "$WORK/answer.json")"
}
say() { printf '\n== %s\n' "$*"; }
show() { jq -c "${1:-.}" "$WORK/answer.json"; }

admin() { call "$1" "$2" -H "Authorization: Bearer $ADMIN_TOKEN" "${@:3}"; }
creator() { call "$1" "$2" -H "Authorization: Bearer $CREATOR_TOKEN" "${@:3}"; }

call 'readiness' 200 "$GATEWAY_URL/readyz"

# 1. The operator issues a creator token (shown once; the gateway keeps only its SHA-256)
#    and an agent with one slot for a source.
say "1. creator token and agent (admin)"
CREATOR_ID="creator-$RUN"
AGENT_ID="agent-$RUN"
admin 'create creator token' 201 -X POST "$GATEWAY_URL/v1/admin/tokens" -H 'Content-Type: application/json' \
  -d "$(jq -nc --arg s "$CREATOR_ID" '{role: "creator", subject: $s}')"
CREATOR_TOKEN=$(answer .data.token)
show '.data | del(.token)'
admin 'create agent' 201 -X POST "$GATEWAY_URL/v1/admin/agents" -H 'Content-Type: application/json' \
  -d "$(jq -nc --arg a "$AGENT_ID" --arg c "$CREATOR_ID" '{agent_id: $a, creator_id: $c, slots: 1}')"
show .data

# 2. The creator submits the source's manifest and gets a source id and an ingest endpoint.
say "2. source (creator)"
creator 'create source' 201 -X POST "$GATEWAY_URL/v1/byo/sources" -H 'Content-Type: application/json' \
  -d "$(jq -nc --arg a "$AGENT_ID" '{agent_id: $a, manifest: {
        archetype: "wallet-watcher", schema_version: "1.0",
        severity_levels: ["info", "warning", "critical"],
        max_rate: {rate: 10, per: "second", burst: 20},
        coverage: {chains: ["solana"], wallet_set_size: 250},
        contact: "ops@example.com"}}')"
SOURCE_ID=$(answer .data.source_id)
show '.data | {source_id, ingest_endpoint}'

# 3. A signing key: the private key stays in the work folder; the public key is registered
#    and starts out pending.
say "3. signing key (creator)"
openssl genpkey -algorithm ed25519 -out "$WORK/source-key.pem"
openssl pkey -in "$WORK/source-key.pem" -pubout -out "$WORK/source-key.pub.pem"
creator 'register key' 201 -X POST "$GATEWAY_URL/v1/byo/sources/$SOURCE_ID/keys" -H 'Content-Type: application/json' \
  -d "$(jq -nc --rawfile pem "$WORK/source-key.pub.pem" '{public_key: $pem}')"
KEY_ID=$(answer .data.key_id)
show '.data | {key_id, state}'

# new_signal FILE SIGNAL_ID SEVERITY: a signal body, written as the exact bytes to sign and send.
new_signal() {
  jq -ncj --arg id "$2" --arg src "$SOURCE_ID" --arg ts "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg sev "$3" \
    '{signal_id: $id, source_id: $src, ts: $ts, token: "So11111111111111111111111111111111111111112", severity: $sev, confidence: 80}' >"$1"
}
# sign BODY_FILE: fresh X-Svc-Timestamp and X-Svc-Nonce, and the Ed25519 signature of the
# signing string: method, path, timestamp, nonce and the body's SHA-256 in hex, joined by
# line feeds, with no line feed at the end. Sets the HEADERS array.
INGEST_PATH="/v1/byo/sources/$SOURCE_ID/signals"
sign() {
  local ts nonce digest signature
  ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  nonce=$(openssl rand -hex 16)
  digest=$(openssl dgst -sha256 -r "$1" | cut -d' ' -f1)
  printf 'POST\n%s\n%s\n%s\n%s' "$INGEST_PATH" "$ts" "$nonce" "$digest" >"$WORK/signing-string"
  signature=$(openssl pkeyutl -sign -inkey "$WORK/source-key.pem" -rawin -in "$WORK/signing-string" | openssl base64 -A)
  HEADERS=(-H 'Content-Type: application/json' -H "X-Svc-Source-Id: $SOURCE_ID" -H "X-Svc-Key-Id: $KEY_ID"
    -H "X-Svc-Timestamp: $ts" -H "X-Svc-Nonce: $nonce" -H "X-Svc-Signature: ed25519=:$signature:")
}
# push STEP EXPECTED_STATUS BODY_FILE: the body, with the HEADERS of the last sign.
push() { call "$1" "$2" -X POST "$GATEWAY_URL$INGEST_PATH" "${HEADERS[@]}" --data-binary "@$3"; }

# 4. A test signal signed with the pending key: accepted as a test (recorded, never
#    delivered), which lets the key be promoted to active.
say "4. test signal with the pending key, then promote it"
new_signal "$WORK/test.json" "test-$RUN-0001" info
sign "$WORK/test.json"
push 'test signal' 202 "$WORK/test.json"
[[ $(answer .test) == true ]] || fail "the test signal's answer does not say \"test\": true"
show
creator 'promote key' 200 -X POST "$GATEWAY_URL/v1/byo/sources/$SOURCE_ID/keys/$KEY_ID/promote"
show '.data | {key_id, state}'

# 5. Signals. A retry of the same body, signed again with a fresh timestamp and nonce, is
#    a deduplicated 202 carrying the original received_at.
say "5. a signal, and its retry (deduplicated)"
new_signal "$WORK/signal.json" "sig-$RUN-0001" warning
sign "$WORK/signal.json"
push 'signal' 202 "$WORK/signal.json"
show
RECEIVED_AT=$(answer .received_at)
sign "$WORK/signal.json"
push 'retry' 202 "$WORK/signal.json"
show
[[ $(answer .deduplicated) == true && $(answer .received_at) == "$RECEIVED_AT" ]] ||
  fail "the retry was not answered as a duplicate of the first push"

# 6. Two refusals on purpose: the same request sent again, nonce and all (a replay), and a
#    severity the manifest does not declare.
say "6. two refusals: a replayed request, and an undeclared severity"
push 'replayed request' 401 "$WORK/signal.json"
expect_code 'replayed request' replayed_nonce
show .error
new_signal "$WORK/bad.json" "sig-$RUN-0002" apocalyptic
sign "$WORK/bad.json"
push 'undeclared severity' 400 "$WORK/bad.json"
expect_code 'undeclared severity' invalid_severity
show .error

# 7. The source's refused requests, newest first: what a creator reads to find out why a
#    server's pushes fail.
say "7. the source's ingest errors (creator)"
creator 'list ingest errors' 200 "$GATEWAY_URL/v1/byo/sources/$SOURCE_ID/ingest-errors?limit=10"
[[ $(jq -r '[.data[].code] | join(",")' "$WORK/answer.json") == invalid_severity,replayed_nonce ]] ||
  fail "the ingest-error list does not hold the two refusals: $(cat "$WORK/answer.json")"
show '.data[] | {time, status, code, key_id, signal_id}'

printf '\nDone: source %s, key %s (active), 2 signals accepted (one a test), 1 retry deduplicated, 2 refusals listed.\n' "$SOURCE_ID" "$KEY_ID"
