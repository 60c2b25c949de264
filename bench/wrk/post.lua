-- wrk script: POST one fixed MCP body with fixed headers, then print the latency distribution as JSON.
--   wrk -t1 -c2 -d5s --latency -s bench/wrk/post.lua http://127.0.0.1:PORT/mcp -- BODY_FILE TOKEN
-- The request is formatted once in init() (wrk's default), so no Lua runs per request.

local body_file, token

function init(args)
   body_file = args[1]
   token = args[2] or "bench-agent-token-0001"
   local f = assert(io.open(body_file, "rb"))
   wrk.body = f:read("*a")
   f:close()
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Accept"] = "application/json, text/event-stream"
   wrk.headers["Authorization"] = "Bearer " .. token
end

local PERCENTILES = {1, 5, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 95, 97.5, 99, 99.5, 99.9, 99.99}

function done(summary, latency, requests)
   local p = {}
   for _, q in ipairs(PERCENTILES) do
      p[#p + 1] = string.format('"%s": %d', tostring(q), latency:percentile(q))
   end
   local e = summary.errors
   io.write(string.format(
      'WRKJSON {"requests": %d, "duration_us": %d, "bytes": %d, ' ..
      '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
      '"latency_us": {"min": %d, "max": %d, "mean": %.3f, "stdev": %.3f, "percentiles": {%s}}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.max, latency.mean, latency.stdev, table.concat(p, ", ")))
end
