package callrecord

import "github.com/signalbox/signalbox/internal/datadirector/nfcopy"

// MaskNumber hides all but the last keep digits of number
// (nfcopy.MaskDigits): MaskNumber("+19725550101", 4) is "+xxxxxxx0101".
func MaskNumber(number string, keep int) string { return nfcopy.MaskDigits(number, keep) }

// Mask masks the record's numbers (calling, called and their transformed
// forms) but for their last keep digits; keep <= 0 leaves them.
func (r *Record) Mask(keep int) {
	if keep <= 0 {
		return
	}
	r.Calling = MaskNumber(r.Calling, keep)
	r.Called = MaskNumber(r.Called, keep)
	r.TransformedCalling = MaskNumber(r.TransformedCalling, keep)
	r.TransformedCalled = MaskNumber(r.TransformedCalled, keep)
}
