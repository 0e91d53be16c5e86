-- infer.lua: wrk's request for tests/oip/wrk.sh: a POST infer of the example MLP, one row of 16
-- floats, as JSON data (WRK_BODY=json) or as Triton's binary tensor data (WRK_BODY=binary).
local mode = os.getenv("WRK_BODY") or "json"
wrk.method = "POST"
if mode == "binary" then
	local head = '{"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}}],' ..
		'"outputs":[{"name":"y","parameters":{"binary_data":true}}]}'
	-- 16 float32 values of 0.5 (0x3f000000, little-endian)
	wrk.body = head .. string.rep("\0\0\0\63", 16)
	wrk.headers["Inference-Header-Content-Length"] = tostring(#head)
	wrk.headers["Content-Type"] = "application/octet-stream"
else
	local xs = {}
	for i = 1, 16 do xs[i] = tostring(i / 16) end
	wrk.body = '{"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":[' .. table.concat(xs, ",") .. ']}]}'
	wrk.headers["Content-Type"] = "application/json"
end
