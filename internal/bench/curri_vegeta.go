package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// vegetaTarget is one line of vegeta's JSON target format (vegeta attack
// -format json): the body is base64, as encoding/json writes a []byte.
type vegetaTarget struct {
	Method string              `json:"method"`
	URL    string              `json:"url"`
	Body   []byte              `json:"body"`
	Header map[string][]string `json:"header"`
}

// writeVegetaTargets writes the calls as vegeta targets for url, with the
// headers CUCM sends (vegeta's HTTP client adds Host, Content-Length and
// its own connection handling), so that an independent load generator
// sends the same requests the bench does.
func writeVegetaTargets(path, url string, calls []call) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("vegeta targets: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	header := map[string][]string{
		"Accept":       {"*/*"},
		"Content-Type": {"text/xml; charset=ISO-8859-1"},
		"methodName":   {"isRoleAccessAllowed"},
		"User-Agent":   {"CiscoUCM-HttpClient/1.0"},
	}
	for _, c := range calls {
		if err := enc.Encode(vegetaTarget{Method: "POST", URL: url, Body: []byte(renderBody(c)), Header: header}); err != nil {
			f.Close()
			return fmt.Errorf("vegeta targets: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("vegeta targets %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vegeta targets %s: %w", path, err)
	}
	return nil
}
