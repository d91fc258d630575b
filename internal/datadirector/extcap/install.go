package extcap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// PersonalFolder is the user's personal extcap folder of the Wireshark
// installed here: what `tshark -G folders` says, else by Wireshark's
// version (4.0 and older read ~/.config/wireshark/extcap, 4.1 and later
// ~/.local/lib/wireshark/extcap; Windows %APPDATA%\Wireshark\extcap). how
// says how it was found.
func PersonalFolder() (dir, how string, err error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", "", err
	}
	if runtime.GOOS == "windows" {
		return filepath.Join(os.Getenv("APPDATA"), "Wireshark", "extcap"), "Wireshark's folder on Windows", nil
	}
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		return filepath.Join(home, ".local", "lib", "wireshark", "extcap"),
			"no tshark found: the folder of Wireshark 4.1 and later (for 4.0, give -dir ~/.config/wireshark/extcap)", nil
	}
	if out, err := exec.Command(tshark, "-G", "folders").Output(); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "Personal Extcap path" {
				return strings.TrimSpace(v), "tshark -G folders", nil
			}
		}
	}
	out, err := exec.Command(tshark, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("tshark --version: %w", err)
	}
	major, minor, ok := wiresharkVersion(string(out))
	if !ok {
		return "", "", fmt.Errorf("tshark --version: no version in %q", firstLine(string(out)))
	}
	how = fmt.Sprintf("Wireshark %d.%d", major, minor)
	if major < 4 || major == 4 && minor == 0 {
		// The personal configuration folder's extcap: WIRESHARK_CONFIG_DIR
		// moves it.
		if d := os.Getenv("WIRESHARK_CONFIG_DIR"); d != "" {
			return filepath.Join(d, "extcap"), how + " and WIRESHARK_CONFIG_DIR", nil
		}
		return filepath.Join(home, ".config", "wireshark", "extcap"), how, nil
	}
	return filepath.Join(home, ".local", "lib", "wireshark", "extcap"), how, nil
}

var reVersion = regexp.MustCompile(`\b(\d+)\.(\d+)\.\d+`)

// wiresharkVersion reads "TShark (Wireshark) 4.0.17 (...)".
func wiresharkVersion(s string) (major, minor int, ok bool) {
	m := reVersion.FindStringSubmatch(firstLine(s))
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Install puts a link to the running binary, named signalbox, into dir
// (PersonalFolder when empty) and returns where. Wireshark runs it with
// --extcap-interfaces, which the binary answers without a subcommand. On
// Windows, where links need privileges, it copies the binary.
func Install(dir string) (path string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path = filepath.Join(dir, Interface)
	if runtime.GOOS == "windows" {
		path += ".exe"
		b, err := os.ReadFile(self)
		if err != nil {
			return "", err
		}
		return path, os.WriteFile(path, b, 0o755)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return path, os.Symlink(self, path)
}
