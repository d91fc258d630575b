package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// errorBody is every error the API returns.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// apiError is an error with a definite status, raised by the handlers.
type apiError struct {
	Status int
	Field  string
	Msg    string
}

// Error is the message alone: handlers write messages that name the field.
func (e *apiError) Error() string { return e.Msg }

func badRequest(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf(format, args...)}
}

// fail maps err to a status and writes it as JSON. Unexpected errors are
// logged and answered with a generic message, so internals do not leak.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ae  *apiError
		mbe *http.MaxBytesError
		cfe *callpolicy.FieldError
		dfe *director.FieldError
	)
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.Status, ae.Error(), ae.Field)
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), "")
	case errors.As(err, &cfe):
		writeError(w, http.StatusBadRequest, err.Error(), cfe.Field)
	case errors.As(err, &dfe):
		writeError(w, http.StatusBadRequest, err.Error(), dfe.Field)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error(), "")
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, err.Error(), "")
	case errors.Is(err, store.ErrInUse):
		// "directory "corp" is read by rule 7 of policy "default"": what to change first.
		writeError(w, http.StatusConflict, strings.TrimSuffix(err.Error(), ": "+store.ErrInUse.Error())+"; change those first", "")
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		// The client went away; nobody reads the answer.
		writeError(w, http.StatusServiceUnavailable, "request canceled", "")
	default:
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error (logged)", "")
	}
}

func writeError(w http.ResponseWriter, status int, msg, field string) {
	writeJSON(w, status, errorBody{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own types are encoded; this is a programming error.
		http.Error(w, `{"error":"internal error: encoding response"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// readBody reads the whole body up to limit bytes; beyond it the error is an
// *http.MaxBytesError (413).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, limit)
	var b []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= limit {
		// A declared length is read into one buffer of that size (net/http
		// ends the body there): io.ReadAll grows by doubling, ~2.5x the
		// body in garbage (90 MB for a 35 MB bulk rule load).
		b = make([]byte, n)
		_, err = io.ReadFull(body, b)
	} else {
		b, err = io.ReadAll(body)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("", "reading request body: %v", err)
	}
	return b, nil
}

// mediaType is the request's Content-Type without parameters ("" if none).
func mediaType(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", &apiError{Status: http.StatusUnsupportedMediaType, Msg: fmt.Sprintf("malformed Content-Type %q", ct)}
	}
	return strings.ToLower(mt), nil
}

// isJSONType accepts JSON media types, and also curl's default for -d
// (application/x-www-form-urlencoded), so that `curl -d '{...}'` works as
// operators type it; the body must still be JSON. Auth is a bearer header,
// never a cookie, so a browser form cannot forge a request.
func isJSONType(mt string) bool {
	return mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-www-form-urlencoded"
}

func requireJSON(r *http.Request) error {
	mt, err := mediaType(r)
	if err != nil {
		return err
	}
	if !isJSONType(mt) {
		return &apiError{Status: http.StatusUnsupportedMediaType, Msg: fmt.Sprintf("Content-Type %q is not accepted here; send application/json", mt)}
	}
	return nil
}

// decodeJSON decodes the request body (JSON, at most limit bytes) into v,
// refusing unknown fields and trailing data.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	b, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeJSONBytes(b, v)
}

func decodeJSONBytes(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "request body must hold exactly one JSON value; found more after offset %d", dec.InputOffset())
	}
	return nil
}

// jsonError turns a decoding error into a 400 that names the field or the
// offset, in words a person fixing the request understands.
func jsonError(err error) error {
	var (
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
		pe  *time.ParseError
	)
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("", "request body is empty; a JSON value is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "request body ends in the middle of a JSON value")
	case errors.As(err, &se):
		return badRequest("", "invalid JSON at offset %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return badRequest("", "expected %s, got a JSON %s (offset %d)", jsonKind(ute.Type), ute.Value, ute.Offset)
		}
		return badRequest(field, "%s: expected %s, got a JSON %s (offset %d)", field, jsonKind(ute.Type), ute.Value, ute.Offset)
	case errors.As(err, &pe):
		return badRequest("", "invalid time %q: RFC 3339 expected, e.g. 2026-01-02T15:04:05Z", pe.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badRequest(name, "unknown field %q", name)
	}
	return badRequest("", "invalid JSON: %s", strings.TrimPrefix(msg, "json: "))
}

// jsonKind says in JSON terms what a Go type expects.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another value"
}

// prefixField names where in a batch a validation error occurred, e.g.
// rules[123].match.called, keeping the original message.
func prefixField(prefix string, err error) error {
	var cfe *callpolicy.FieldError
	if errors.As(err, &cfe) {
		field := prefix
		if cfe.Field != "" {
			field = prefix + "." + cfe.Field
		}
		return &apiError{Status: http.StatusBadRequest, Field: field, Msg: field + ": " + cfe.Msg}
	}
	return &apiError{Status: http.StatusBadRequest, Field: prefix, Msg: prefix + ": " + err.Error()}
}

// badRequestFrom turns a parser error into a 400 keeping its full message
// (which names the line) and the field when the parser named one.
func badRequestFrom(err error) error {
	var cfe *callpolicy.FieldError
	var dfe *director.FieldError
	field := ""
	switch {
	case errors.As(err, &cfe):
		field = cfe.Field
	case errors.As(err, &dfe):
		field = dfe.Field
	}
	return &apiError{Status: http.StatusBadRequest, Field: field, Msg: err.Error()}
}
