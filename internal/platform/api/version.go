package api

import (
	"net/http"
	"runtime"
)

type versionInfo struct {
	Version       string `json:"version"`
	Go            string `json:"go"`
	Store         string `json:"store"`
	ConfigVersion int64  `json:"config_version"`
}

func (s *server) getVersion(w http.ResponseWriter, r *http.Request) {
	cv, err := s.store.ConfigVersion(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := s.cfg.Version
	if v == "" {
		v = "dev"
	}
	writeJSON(w, http.StatusOK, versionInfo{Version: v, Go: runtime.Version(), Store: s.store.Backend(), ConfigVersion: cv})
}
