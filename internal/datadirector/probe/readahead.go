package probe

import "io"

// readAhead reads a connection in a goroutine of its own into a few rotating
// buffers, so that receiving (TLS decryption included) overlaps decoding. On
// a busy host each stage then gets its own thread's share of CPU instead of
// one thread doing both.
type readAhead struct {
	full chan []byte
	free chan []byte
	done chan struct{}
	cur  []byte // unread part of buf
	buf  []byte // chunk being consumed, handed back when empty
	err  error  // set by fill before it closes full
}

func newReadAhead(r io.Reader, chunks, size int) *readAhead {
	ra := &readAhead{full: make(chan []byte, chunks), free: make(chan []byte, chunks), done: make(chan struct{})}
	for i := 0; i < chunks; i++ {
		ra.free <- make([]byte, size)
	}
	go ra.fill(r)
	return ra
}

func (ra *readAhead) fill(r io.Reader) {
	defer close(ra.full)
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.done:
			return
		}
		n, err := r.Read(b[:cap(b)])
		if n > 0 {
			select {
			case ra.full <- b[:n]:
			case <-ra.done:
				return
			}
		} else {
			ra.free <- b
		}
		if err != nil {
			ra.err = err
			return
		}
	}
}

// Read implements io.Reader; after the source's error it returns that error.
func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.buf != nil {
			ra.free <- ra.buf[:cap(ra.buf)]
			ra.buf = nil
		}
		b, ok := <-ra.full
		if !ok {
			return 0, ra.err
		}
		ra.buf, ra.cur = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// Close stops the reading goroutine once its pending Read returns (closing
// the connection ends that).
func (ra *readAhead) Close() { close(ra.done) }
