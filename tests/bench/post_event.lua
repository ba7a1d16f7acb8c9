-- wrk script: POST /v1/events with a bearer key from the environment.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOCSIN_KEY")
wrk.body = '{"channelName":"bench","title":"Benchmark event","icon":"🚀","tags":["bench","wrk"],"metadata":{"n":1,"ok":true},"notify":false}'

-- Each wrk thread runs its own copy of this script: count per thread, and
-- add the threads' counts up at the end.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

created, other = 0, 0

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
