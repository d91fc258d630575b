package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"gopkg.in/yaml.v3"
)

// openapiYAML is the OpenAPI 3.1 document of this API, kept by hand beside
// the handlers; TestOpenAPIContract (internal/app) holds it to the router
// and to what the handlers take and answer.
//
//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPIJSON is the document as served at GET /api/v1/openapi.json: the
// YAML source in JSON, its keys in the source's order.
func OpenAPIJSON() ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := yamlToJSON(&buf, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// yamlToJSON writes n as JSON, keeping mapping order.
func yamlToJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return yamlToJSON(buf, n.Content[0])
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := yamlToJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := yamlToJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.AliasNode:
		return yamlToJSON(buf, n.Alias)
	case yaml.ScalarNode:
		var v any
		switch n.Tag {
		case "!!str", "!!binary":
			v = n.Value
		case "!!int":
			i, err := strconv.ParseInt(n.Value, 0, 64)
			if err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			v = i
		default:
			if err := n.Decode(&v); err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}

// getOpenAPI serves the document; it needs no token.
func (s *server) getOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(s.openapi)
}

// Routes lists the routes the API serves, "METHOD /path" as registered
// (Go's ServeMux patterns: {name} is a path parameter).
func Routes() []string {
	s := &server{mux: http.NewServeMux()}
	s.routes()
	return s.patterns
}
