package bench

import (
	"context"
	"fmt"
	"io"
)

// RunDirector runs `signalbox bench director`.
func RunDirector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return fmt.Errorf("bench director: not built yet")
}
