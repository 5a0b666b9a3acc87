"""How long the actions wait, defined once for the operations, the service and the CLI."""

# A launch gives up when the API is not ready after this long (a large model loads for
# many minutes on first start).
READY_TIMEOUT_S = 1800.0
# The watch samples the service this often, and gives one request this long.
WATCH_INTERVAL_S = 5.0
WATCH_REQUEST_TIMEOUT_S = 10.0
# One smoke check (a reasoning model may think for minutes before it answers).
SMOKE_TIMEOUT_S = 180.0
# A launch reuses the nodes' facts from a probe begun less than this long ago (and nothing
# changed on the nodes since): a little over the cockpit's 15 s refresh, so its launch acts
# on the facts its fit panel shows instead of probing again.
FACTS_FRESH_S = 20.0
