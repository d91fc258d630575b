package curri

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// httpDate caches the Date header value, rendered once a second.
var httpDate struct {
	sec atomic.Int64
	val atomic.Pointer[[]byte]
}

func appendDate(b []byte) []byte {
	now := time.Now()
	if sec := now.Unix(); httpDate.sec.Load() != sec || httpDate.val.Load() == nil {
		v := []byte(now.UTC().Format(http.TimeFormat))
		httpDate.val.Store(&v)
		httpDate.sec.Store(sec)
	}
	b = append(b, "Date: "...)
	b = append(b, *httpDate.val.Load()...)
	return append(b, "\r\n"...)
}

var keepAliveHeader = "Keep-Alive: timeout=" + strconv.Itoa(int(IdleTimeout/time.Second)) + "\r\n"

// The Connection headers of a kept connection, built once (keepAliveHeader
// is not a constant, so concatenating it per response allocated).
var (
	keepAlive10Headers = keepAliveHeader + "Connection: keep-alive\r\n"
	keepAliveHeaders   = keepAliveHeader + "Connection: Keep-Alive\r\n"
)

func appendConnection(b []byte, keep, http10 bool) []byte {
	switch {
	case !keep:
		return append(b, "Connection: close\r\n"...)
	case http10:
		return append(b, keepAlive10Headers...)
	}
	return append(b, keepAliveHeaders...)
}

func appendOK(b []byte, http10 bool) []byte {
	if http10 {
		return append(b, "HTTP/1.0 200 OK\r\n"...)
	}
	return append(b, "HTTP/1.1 200 OK\r\n"...)
}

func appendPostHead(b []byte, n int, keep, http10 bool) []byte {
	b = appendOK(b, http10)
	b = append(b, "Content-Type: text/xml; charset=utf-8\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n"...)
	b = appendConnection(b, keep, http10)
	b = appendDate(b)
	return append(b, "\r\n"...)
}

func appendHeadOK(b []byte, keep, http10 bool) []byte {
	b = appendOK(b, http10)
	b = appendConnection(b, keep, http10)
	b = appendDate(b)
	return append(b, "\r\n"...)
}

func appendStatusOnly(b []byte, status int, closeConn bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nContent-Length: 0\r\n"...)
	if status == http.StatusMethodNotAllowed {
		b = append(b, "Allow: POST, HEAD\r\n"...)
	}
	if closeConn {
		b = append(b, "Connection: close\r\n"...)
	}
	b = appendDate(b)
	return append(b, "\r\n"...)
}
