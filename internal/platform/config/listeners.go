package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ListenersFile is the file in the data directory where a running serve
// says where it listens: each listener's bound address, so that one asked
// for port 0 (":0", "127.0.0.1:0") is found by whoever started it — a
// test, the benchmark, an operator's script. serve writes it once every
// listener is up (replacing it whole) and removes it when it stops.
const ListenersFile = "listeners.json"

// Listeners is the content of ListenersFile.
type Listeners struct {
	PID   int    `json:"pid"`             // the serve process
	HTTP  string `json:"http"`            // API, console, metrics, health
	CURRI string `json:"curri"`           // CURRI (plain or TLS)
	Pprof string `json:"pprof,omitempty"` // -pprof-addr
	// The embedded broker's listener and what it tells clients to dial;
	// empty with the director off or an external Kafka.
	Kafka           string `json:"kafka,omitempty"`
	KafkaAdvertised string `json:"kafka_advertised,omitempty"`
	Ingest          string `json:"ingest,omitempty"` // the HTTP/2 ingest
}

// WriteListeners writes l into dataDir's ListenersFile, whole: a reader
// sees the previous file or this one, never part of it.
func WriteListeners(dataDir string, l Listeners) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, "."+ListenersFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("listeners file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, ListenersFile)); err != nil {
		return fmt.Errorf("listeners file: %w", err)
	}
	return nil
}

// RemoveListeners removes dataDir's ListenersFile if it is pid's.
func RemoveListeners(dataDir string, pid int) {
	if l, err := ReadListeners(dataDir); err == nil && l.PID == pid {
		_ = os.Remove(filepath.Join(dataDir, ListenersFile))
	}
}

// ReadListeners reads dataDir's ListenersFile.
func ReadListeners(dataDir string) (Listeners, error) {
	var l Listeners
	b, err := os.ReadFile(filepath.Join(dataDir, ListenersFile))
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("%s: %w", filepath.Join(dataDir, ListenersFile), err)
	}
	return l, nil
}

// WaitListeners waits until the serve process pid (any, when 0) has written
// dataDir's ListenersFile, or exited (exited is closed then), or ctx ends.
func WaitListeners(ctx context.Context, dataDir string, pid int, exited <-chan struct{}) (Listeners, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		l, err := ReadListeners(dataDir)
		if err == nil && (l.PID == pid || pid == 0) {
			return l, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return Listeners{}, fmt.Errorf("serve (pid %d) did not write %s: %w", pid, filepath.Join(dataDir, ListenersFile), ctx.Err())
		case <-exited:
			return Listeners{}, fmt.Errorf("serve (pid %d) exited before it listened", pid)
		case <-t.C:
		}
	}
}
