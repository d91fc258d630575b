package app

import (
	"context"
	"errors"
	"net"
)

// Shutdown stops the server's parts, the last started first (supervisor):
// the background loops, the API and CURRI listeners (finishing in-flight
// requests), the director (flushing call records while its broker is up,
// then the feeds, the records store, the broker), the rule hit counts and
// the call log (written), the store. -shutdown-timeout bounds it all.
func (s *Server) Shutdown() error {
	var err error
	s.closed.Do(func() {
		s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		err = s.parts.stop(ctx)
		s.log.Info("stopped")
	})
	return err
}

// httpListener is what stopping needs of the CURRI server and the API's
// http.Server.
type httpListener interface {
	Shutdown(context.Context) error
	Close() error
}

// shutdownListener stops srv, finishing in-flight requests until ctx ends
// and closing it then; ln is closed too, in case srv never served it.
func shutdownListener(ctx context.Context, srv httpListener, ln net.Listener) error {
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	if cerr := ln.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	return err
}
