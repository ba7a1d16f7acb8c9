-- wrk script: POST /v1/events with a bearer key from the environment.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOCSIN_KEY")
wrk.body = '{"channelName":"bench","title":"Benchmark event","icon":"🚀","tags":["bench","wrk"],"metadata":{"n":1,"ok":true},"notify":false}'

local statuses = {}
response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

done = function(summary, latency, requests)
  for status, count in pairs(statuses) do
    io.write(string.format("status %d: %d\n", status, count))
  end
end
