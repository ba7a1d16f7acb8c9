-- wrk script: POST /v1/events with a bearer key from the environment.
--   TOCSIN_KEY          the API key (any text for the baseline server)
--   BENCH_NOTIFY        "true" to ask for a push (default false)
--   BENCH_IDEMPOTENCY   "1" to send a unique Idempotency-Key with each request
--   BENCH_USERS         a number: each event names one of that many users
--                       (`userId`), in turn, so each costs its user's upsert
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOCSIN_KEY")
local notify = os.getenv("BENCH_NOTIFY") == "true" and "true" or "false"
wrk.body = '{"channelName":"bench","title":"Benchmark event","icon":"🚀","tags":["bench","wrk"],"metadata":{"n":1,"ok":true},"notify":' .. notify .. '}'
local idempotent = os.getenv("BENCH_IDEMPOTENCY") == "1"
local users = tonumber(os.getenv("BENCH_USERS") or "")

-- Each wrk thread runs its own copy of this script: count per thread, and
-- add the threads' counts up at the end.
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

created, other, sent = 0, 0, 0
-- Unique across threads and across runs against one server.
local run = tostring(os.time()) .. "-" .. tostring(math.random(1, 1e9))

if idempotent then
  function request()
    sent = sent + 1
    wrk.headers["Idempotency-Key"] = "bench-" .. run .. "-" .. tostring(id) .. "-" .. sent
    return wrk.format()
  end
elseif users then
  local head = wrk.body:sub(1, -2)
  function request()
    sent = sent + 1
    local user = "user-" .. tostring(sent % users)
    return wrk.format(nil, nil, nil, head .. ',"userId":"' .. user .. '"}')
  end
end

function response(status, headers, body)
  if status == 201 then
    created = created + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local c, o = 0, 0
  for _, thread in ipairs(threads) do
    c = c + thread:get("created")
    o = o + thread:get("other")
  end
  io.write(string.format("201: %d, other statuses: %d\n", c, o))
end
