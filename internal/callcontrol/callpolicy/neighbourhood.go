package callpolicy

import "regexp"

// Neighbourhood is a rule condition against neighbourhood spoofing: a
// caller ID made to look local by copying the called number's first
// digits. It matches a call whose calling number, in its national form,
// begins with the same Digits digits as the called number's and is not
// the called number itself (N = 6 is the NPA-NXX of the North American
// plan). The numbers are read in whatever form CUCM sends them — +1…,
// 1 and ten digits, ten digits, and the transformed forms — through the
// numbering plan's country code and trunk prefix; a number of another
// country, an anonymous or missing caller never match.
type Neighbourhood struct {
	// Digits is how many leading digits of the national number are
	// compared (1 to 15; default 6).
	Digits int `json:"digits,omitempty"`
	// CountryCode is the home numbering plan's (default 1, the NANP);
	// TrunkPrefix its national prefix (default 1 in the NANP, else 0).
	CountryCode string `json:"country_code,omitempty"`
	TrunkPrefix string `json:"trunk_prefix,omitempty"`
}

var (
	reCountryCode = regexp.MustCompile(`^[1-9][0-9]{0,2}$`)
	reTrunkPrefix = regexp.MustCompile(`^[0-9]{0,3}$`)
)

// neighbourhood is a compiled Neighbourhood.
type neighbourhood struct {
	digits         int
	country, trunk string
}

func compileNeighbourhood(n *Neighbourhood) (*neighbourhood, error) {
	c := &neighbourhood{digits: n.Digits, country: n.CountryCode, trunk: n.TrunkPrefix}
	if c.digits == 0 {
		c.digits = 6
	}
	if c.digits < 1 || c.digits > 15 {
		return nil, fieldErr("match.neighbourhood.digits", "%d: want 1 to 15 (6 is the NPA-NXX of the NANP)", n.Digits)
	}
	if c.country == "" {
		c.country = "1"
	}
	if !reCountryCode.MatchString(c.country) {
		return nil, fieldErr("match.neighbourhood.country_code", "%q: want 1 to 3 digits, not starting with 0 (1, 44, 353)", n.CountryCode)
	}
	if c.trunk == "" {
		c.trunk = "0"
		if c.country == "1" {
			c.trunk = "1"
		}
	}
	if !reTrunkPrefix.MatchString(c.trunk) {
		return nil, fieldErr("match.neighbourhood.trunk_prefix", "%q: want up to 3 digits (1 in the NANP, 0 elsewhere)", n.TrunkPrefix)
	}
	return c, nil
}

// national is number's national significant number in the home plan, ""
// when it is of another country, anonymous or not a number.
func (c *neighbourhood) national(number string) string {
	n := number
	switch {
	case n == "" || n == "anonymous":
		return ""
	case n[0] == '+':
		if len(n) <= 1+len(c.country) || n[1:1+len(c.country)] != c.country {
			return "" // another country
		}
		n = n[1+len(c.country):]
	case c.trunk != "" && len(n) > len(c.trunk) && n[:len(c.trunk)] == c.trunk:
		n = n[len(c.trunk):]
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return ""
		}
	}
	return n
}

// matches reports whether the calling number (as sent, else transformed)
// looks local to the called one (as sent, else transformed): the same
// first digits, not the same number.
func (c *neighbourhood) matches(calling, called, tCalling, tCalled string) bool {
	from := c.national(calling)
	if from == "" {
		from = c.national(tCalling)
	}
	to := c.national(called)
	if to == "" {
		to = c.national(tCalled)
	}
	return len(from) >= c.digits && len(to) >= c.digits && from[:c.digits] == to[:c.digits] && from != to
}
