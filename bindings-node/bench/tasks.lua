-- wrk: end to end. Each connection creates a task of `noop`, then polls tasks/get until the
-- task is terminal, then creates the next; done() prints how many tasks ended completed.
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'
local base = {["content-type"] = "application/json", ["accept"] = "application/json, text/event-stream", ["mcp-protocol-version"] = "2026-07-28"}
local create = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"noop","arguments":{},' .. meta .. '}}'

local function headers(method, name)
  local h = {}
  for k, v in pairs(base) do h[k] = v end
  h["mcp-method"] = method
  h["mcp-name"] = name
  return h
end

local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) pending = {}; completed = 0; bad = 0 end

function request()
  local id = table.remove(pending, 1)
  if id then
    local body = '{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"' .. id .. '",' .. meta .. '}}'
    return wrk.format("POST", nil, headers("tasks/get", id), body)
  end
  return wrk.format("POST", nil, headers("tools/call", "noop"), create)
end

function response(status, headers, body)
  local id = body:match('"taskId":"([^"]+)"')
  if status ~= 200 or id == nil then bad = bad + 1; return end
  if body:find('"resultType":"task"', 1, true) then table.insert(pending, id); return end
  local state = body:match('"status":"([a-z_]+)"')
  if state == "completed" then completed = completed + 1
  elseif state == "working" then table.insert(pending, id)
  else bad = bad + 1 end
end

function done(summary, latency, requests)
  local c, b = 0, 0
  for _, t in ipairs(threads) do c = c + t:get("completed"); b = b + t:get("bad") end
  io.write(string.format("RESULT completed=%d bad=%d seconds=%.3f\n", c, b, summary.duration / 1e6))
end
