-- wrk: every request creates a task of `noop` as a client declaring the extension. A response
-- that is not a CreateTaskResult counts as bad (printed by done()).
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.headers["mcp-protocol-version"] = "2026-07-28"
wrk.headers["mcp-method"] = "tools/call"
wrk.headers["mcp-name"] = "noop"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"noop","arguments":{},' .. meta .. '}}'

local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0; created = 0 end
function response(status, headers, body)
  if status == 200 and body:find('"resultType":"task"', 1, true) then created = created + 1 else bad = bad + 1 end
end
function done(summary, latency, requests)
  local c, b = 0, 0
  for _, t in ipairs(threads) do c = c + t:get("created"); b = b + t:get("bad") end
  io.write(string.format("RESULT created=%d bad=%d seconds=%.3f\n", c, b, summary.duration / 1e6))
end
