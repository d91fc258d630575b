package app

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/snmpnotify"
	"github.com/signalbox/signalbox/internal/testkit"
)

// A serve configured with an SNMPv3 manager sends the alarms it raises to
// net-snmp's snmptrapd, authenticated and encrypted, named by the MIB it
// ships.
func TestAlarmsReachSNMPManager(t *testing.T) {
	t.Parallel()
	mibDir, _ := filepath.Abs("../../deploy/snmp")
	engine := snmpnotify.EngineIDFromText("edge-1")
	d := testkit.SNMPTrapd(t, fmt.Sprintf("createUser -e 0x%x noc SHA-512 auth-secret-1 AES priv-secret-1\nauthUser log noc priv\n", engine), mibDir)

	cfg := testConfig(t, t.TempDir(), false)
	cfg.NodeName = "edge-1"
	cfg.SNMPManagers = d.Addr
	cfg.SNMPVersion = "3"
	cfg.SNMPUser = "noc"
	cfg.SNMPAuthProtocol = "SHA-512"
	cfg.SNMPAuthPassword = "auth-secret-1"
	cfg.SNMPPrivProtocol = "AES"
	cfg.SNMPPrivPassword = "priv-secret-1"
	s := startServer(t, cfg)
	defer s.Shutdown()

	// CUCM asks for a policy that does not exist: the watcher (every 5 s)
	// raises curri_unknown_policy.
	c := dialCUCM(t, s.CURRIAddr())
	if _, body := c.do("POST", "/curri/nosuchpolicy", xacmlRequest("1", "2")); decisionOf(t, body) != "Indeterminate" {
		t.Fatalf("unknown policy: %s", body)
	}
	line := d.Next(t, 10*time.Second)
	for _, want := range []string{
		"SNMPv2-MIB::snmpTrapOID.0 = OID: SIGNALBOX-MIB::signalboxAlarmRaised",
		"SIGNALBOX-MIB::signalboxAlarmId = STRING: curri/nosuchpolicy/curri_unknown_policy",
		"SIGNALBOX-MIB::signalboxAlarmKind = STRING: curri_unknown_policy",
		"SIGNALBOX-MIB::signalboxAlarmSeverity = INTEGER: major(4)",
		"SIGNALBOX-MIB::signalboxAlarmComponent = STRING: curri/nosuchpolicy",
		"SIGNALBOX-MIB::signalboxAlarmNode = STRING: edge-1",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("notification lacks %q:\n%s", want, line)
		}
	}
	// Counted once the send returns, which may be after snmptrapd printed
	// it; the README's SNMP metrics, with their labels.
	want := []string{`signalbox_snmp_notifications_total{manager="` + d.Addr + `",result="sent"} 1`,
		`signalbox_snmp_notifications_total{manager="` + d.Addr + `",result="failed"} 0`,
		"signalbox_snmp_notifications_dropped_total 0"}
	for name, labels := range snmpMetrics {
		for _, l := range labels {
			if !strings.Contains(strings.Join(want, "\n"), name+"{") || !strings.Contains(strings.Join(want, "\n"), l+"=") {
				t.Errorf("the test does not check %s{%s}", name, l)
			}
		}
	}
	testkit.WaitFor(t, 2*time.Second, "/metrics with "+strings.Join(want, ", "), func() bool {
		_, metrics := get(t, "http://"+s.HTTPAddr()+"/metrics")
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	})
}
