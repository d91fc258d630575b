package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// Shutdown stops accepting, finishes in-flight requests (bounded by
// -shutdown-timeout), stops feeds, flushes the call log and closes the store.
func (s *Server) Shutdown() error {
	var errs []error
	s.closed.Do(func() {
		s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		errs = append(errs, shutdownListeners(ctx, s.listeners())...)
		if s.dir != nil {
			s.dir.stop(ctx)
		}
		// Persist hit counts, then stop background loops and flush the call log.
		if s.policies != nil {
			s.policies.FlushHits(ctx)
		}
		s.cancel()
		select {
		case err := <-s.logDone:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("call log: %w", err))
			}
		case <-ctx.Done():
			errs = append(errs, errors.New("call log flush timed out"))
		}
		s.bg.Wait()
		if s.snmp != nil {
			s.snmp.Stop(ctx)
		}
		if s.store != nil {
			if err := s.store.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		s.log.Info("stopped")
	})
	return errors.Join(errs...)
}

// httpListener is what Shutdown needs of the CURRI server and the API's
// http.Server.
type httpListener interface {
	Shutdown(context.Context) error
	Close() error
}

// shutdownListeners stops the listeners at once, each closed when it does
// not finish in time, and gives their errors.
func shutdownListeners(ctx context.Context, ls []httpListener) []error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, srv := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				errs[i] = err
				srv.Close()
			}
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// listeners returns the servers that were started.
func (s *Server) listeners() []httpListener {
	var out []httpListener
	if s.curriS != nil {
		out = append(out, s.curriS)
	}
	if s.httpSrv != nil {
		out = append(out, s.httpSrv)
	}
	return out
}

// abort releases what a failed Start opened.
func (s *Server) abort() {
	s.cancel()
	for _, srv := range s.listeners() {
		srv.Close()
	}
	for _, ln := range []net.Listener{s.curriLn, s.httpLn} {
		if ln != nil {
			ln.Close()
		}
	}
	if s.dir != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.dir.stop(ctx)
		cancel()
	}
	if s.calls != nil {
		select {
		case <-s.logDone:
		case <-time.After(5 * time.Second):
		}
	}
	if s.snmp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.snmp.Stop(ctx)
		cancel()
	}
	if s.store != nil {
		s.store.Close()
	}
}
