-- wrk script: each request carries a new bearer token (a new grant) until N grants have been sent,
-- then repeats the last one; stops after N responses. Used to measure Envoy memory per tracked grant.
--   wrk -t1 -c2 -d300s -s bench/wrk/grants.lua http://127.0.0.1:PORT/mcp -- BODY_FILE N
-- (one thread, so the counter is global; wrk sleeps for -d regardless, so bench/load.py watches
-- the filter's allowed counter and stops wrk once N calls went through)

local body, n, sent, seen = nil, 0, 0, 0

function init(args)
   local f = assert(io.open(args[1], "rb"))
   body = f:read("*a")
   f:close()
   n = tonumber(args[2])
end

function request()
   sent = sent + 1
   local g = sent <= n and sent or n
   return wrk.format("POST", nil, {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer grant-" .. g,
   }, body)
end

function response(status, headers, resp_body)
   seen = seen + 1
   if status ~= 200 then
      io.write("unexpected status " .. status .. ": " .. tostring(resp_body) .. "\n")
   end
   if seen >= n then
      wrk.thread:stop()
   end
end
