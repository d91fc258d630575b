// Package bench holds signalbox's end-to-end benchmarks. `signalbox bench
// curri` drives a real signalbox (a child process it starts, or a -target on
// loopback) the way Cisco Unified CM does — HTTP/1.1 keep-alive connections,
// HEAD probes, XACML requests with CUCM's exact headers — at an open-loop
// fixed rate or flat out, and reports latency (coordinated-omission safe),
// decisions, errors and the server's own CPU and memory beside the reference
// appliance's published figures.
package bench
