package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// benchDirectory is the directory -directory loads.
const benchDirectory = "bench"

// dirCanary is the calling number (44xxxxxxxx: no rule, list or draw
// uses it) whose name tells directory generation g is live.
func dirCanary(g int) string { return nthNumber("44", g) }

// canaryName is the name the canary number of reload generation g has in
// directory generation g: once a call from it gets that name, the
// generation is live.
func canaryName(g int) string { return "Canary " + strconv.Itoa(g) }

// directoryCSV renders generation gen of a directory of n exact numbers
// (the callers drawCalls sends no rule decides), n/100 prefixes and the
// canary of gen. A fraction changed of the entries carry gen in their
// names; the rest keep generation 0's.
func directoryCSV(n, gen int, changed float64) []byte {
	var b bytes.Buffer
	b.Grow((n + n/100) * 36)
	b.WriteString("number,name,match\n")
	every := 0 // rename entries i with i%every == 0
	if changed > 0 && gen > 0 {
		every = max(1, int(1/changed+0.5))
	}
	for i := range n {
		b.WriteString(nthNumber(missPrefix, i))
		b.WriteString(",Employee ")
		b.WriteString(strconv.Itoa(i))
		if every > 0 && i%every == 0 {
			b.WriteString(" g")
			b.WriteString(strconv.Itoa(gen))
		}
		b.WriteString(",exact\n")
	}
	for i := range n / 100 {
		fmt.Fprintf(&b, "+1214%05d,Company %d,prefix\n", i, i)
	}
	fmt.Fprintf(&b, "%s,%s,exact\n", dirCanary(gen), canaryName(gen))
	return b.Bytes()
}

// loadDirectory creates the bench directory (or reuses it), imports
// generation 0 and points the policy's default action at it; it returns
// the import's PUT time and the time until a call gets its names.
func loadDirectory(ctx context.Context, api *apiClient, n int) (putMs, liveMs float64, err error) {
	err = api.do(ctx, http.MethodPost, "/api/v1/directories", map[string]string{"id": benchDirectory, "name": "bench callers"}, nil)
	var se *apiStatusError
	if err != nil && !(errors.As(err, &se) && se.status == http.StatusConflict) {
		return 0, 0, err
	}
	var pol map[string]any
	if err := api.do(ctx, http.MethodGet, api.policyPath(), nil, &pol); err != nil {
		return 0, 0, err
	}
	pol["default_action"] = map[string]any{"decision": "permit", "modify": map[string]string{"calling_name": "directory:" + benchDirectory}}
	if err := api.do(ctx, http.MethodPut, api.policyPath(), pol, nil); err != nil {
		return 0, 0, err
	}
	body := directoryCSV(n, 0, 0)
	t0 := time.Now()
	if err := api.replaceDirectoryCSV(ctx, body); err != nil {
		return 0, 0, err
	}
	putMs = ms(time.Since(t0))
	if err := api.waitName(ctx, dirCanary(0), canaryName(0), 60*time.Second); err != nil {
		return 0, 0, err
	}
	return putMs, ms(time.Since(t0)), nil
}

// replaceDirectoryCSV replaces the bench directory's entries with a CSV body.
func (a *apiClient) replaceDirectoryCSV(ctx context.Context, body []byte) error {
	return a.do(ctx, http.MethodPut, "/api/v1/directories/"+benchDirectory+"/entries", csvBody(body), nil)
}

// waitName polls the dry run until a call from number is named name.
func (a *apiClient) waitName(parent context.Context, number, name string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	for {
		var out struct {
			Decision struct {
				Action struct {
					Modify *struct {
						CallingName string `json:"calling_name"`
					} `json:"modify"`
				} `json:"action"`
			} `json:"decision"`
		}
		err := a.do(ctx, http.MethodPost, a.policyPath()+"/evaluate", json.RawMessage(fmt.Sprintf(`{"calling":%q,"called":"50000"}`, number)), &out)
		if m := out.Decision.Action.Modify; err == nil && m != nil && m.CallingName == name {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return errors.New("the run ended before the directory was seen live")
			}
			return fmt.Errorf("directory not live within %v (a call from %s is not named %q; last error %v)", limit, number, name, err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
