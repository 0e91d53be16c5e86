-- oip_wrk.lua: wrk's request for bench/compare_oip.sh: a POST of one binary infer request made
-- by bench/oip_load.py (body.bin, its JSON header's length in body.hlen: Triton's binary tensor
-- data, all outputs asked as binary data), the same bytes tritonclient sends.
-- Env: OIP_REQ=DIR/req/MODEL
local dir = os.getenv("OIP_REQ") or error("oip_wrk.lua: OIP_REQ (DIR/req/MODEL) is not set")
local f = assert(io.open(dir .. "/body.bin", "rb"))
wrk.body = f:read("*a")
f:close()
local h = assert(io.open(dir .. "/body.hlen", "r"))
wrk.method = "POST"
wrk.headers["Inference-Header-Content-Length"] = h:read("*l")
h:close()
wrk.headers["Content-Type"] = "application/octet-stream"

-- a non-200 answer is counted by wrk ("Non-2xx or 3xx responses"); the script checks that line
