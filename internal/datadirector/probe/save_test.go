package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
)

// TestSavePCAP: with -pcap, every record from every connection lands in one
// readable pcap file (one global header).
func TestSavePCAP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "feed.pcap")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Config{Listen: addr, Mode: ModeSynthetic, Expect: 200, PCAPFile: path, Interval: 50 * time.Millisecond}, io.Discard)
		done <- err
	}()
	var conn net.Conn
	for i := 0; ; i++ {
		if conn, err = net.Dial("tcp", addr); err == nil {
			break
		}
		if i > 100 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for half := int64(0); half < 2; half++ {
		if half == 1 {
			conn.Close()
			if conn, err = net.Dial("tcp", addr); err != nil {
				t.Fatal(err)
			}
		}
		sw := newStreamWriter(t, conn)
		sw.preface()
		for i := int64(1); i <= 100; i++ {
			sw.packet(sw.copyFrames(testCopy("NRF", half*100+i, 1500)), time.Now(), false)
		}
	}
	defer conn.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("probe did not finish")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("saved file is not pcap: %v", err)
	}
	n := 0
	for {
		_, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		n++
	}
	if want := 2*2 + 200; n != want { // two connection prefaces (client and server records) + the copies
		t.Fatalf("saved %d records, want %d", n, want)
	}
	if _, err := New(Config{Listen: addr, Mode: ModeHTTP2, PCAPFile: path}); err == nil {
		t.Fatal("-pcap accepted in http2 mode")
	}
}
