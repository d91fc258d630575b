//go:build tools

// Package signalbox pins dependencies that packages under construction will
// import; removed once every one is imported by real code.
package signalbox

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/chromedp/chromedp"
	_ "github.com/expr-lang/expr"
	_ "github.com/gopacket/gopacket/layers"
	_ "github.com/gopacket/gopacket/pcapgo"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/collectors"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "github.com/twmb/franz-go/pkg/sasl/plain"
	_ "github.com/twmb/franz-go/pkg/sasl/scram"
	_ "github.com/wasilibs/go-re2"
	_ "github.com/wasilibs/go-re2/experimental"
	_ "golang.org/x/net/http2"
	_ "golang.org/x/net/http2/hpack"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
