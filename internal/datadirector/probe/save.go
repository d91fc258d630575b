package probe

import (
	"bufio"
	"fmt"
	"os"
	"sync"
)

// pcapSaver writes every synthetic record received, from all connections,
// into one pcap file that Wireshark and tshark open: the first connection's
// global header once, then the records as they arrive.
type pcapSaver struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	header bool
	err    error
}

func newPCAPSaver(path string) (*pcapSaver, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("probe: pcap file: %w", err)
	}
	return &pcapSaver{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (s *pcapSaver) global(g []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.header && s.err == nil {
		_, s.err = s.w.Write(g)
		s.header = true
	}
}

func (s *pcapSaver) record(hdr, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || !s.header {
		return
	}
	if _, s.err = s.w.Write(hdr); s.err == nil {
		_, s.err = s.w.Write(data)
	}
}

// flush makes what was received so far readable (called every interval).
func (s *pcapSaver) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = s.w.Flush()
	}
}

// close flushes and closes the file; a second close reports the first's
// outcome.
func (s *pcapSaver) close() error {
	s.flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return s.err
	}
	if err := s.f.Close(); s.err == nil {
		s.err = err
	}
	s.f = nil
	return s.err
}
