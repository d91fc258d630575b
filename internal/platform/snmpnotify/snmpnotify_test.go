package snmpnotify

import (
	"context"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/outside"
)

var mibDir, _ = filepath.Abs("../../../deploy/snmp")

// The MIB is valid SMIv2 to libsmi's smilint, and net-snmp's snmptranslate
// gives every object and notification the OID this package sends.
func TestMIBDefinesWhatIsSent(t *testing.T) {
	smilint := outside.Tool(t, "smilint")
	out, err := exec.Command(smilint, "-l", "4", "-s", filepath.Join(mibDir, "SIGNALBOX-MIB.txt")).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("smilint: %v\n%s", err, out)
	}
	snmptranslate := outside.Tool(t, "snmptranslate")
	for name, oid := range map[string]string{
		"signalboxMIB": OIDMIB, "signalboxAlarmRaised": OIDAlarmRaised, "signalboxAlarmCleared": OIDAlarmCleared,
		"signalboxAlarmId": OIDAlarmID, "signalboxAlarmKind": OIDAlarmKind, "signalboxAlarmSeverity": OIDSeverity,
		"signalboxAlarmComponent": OIDComponent, "signalboxAlarmText": OIDText, "signalboxAlarmNode": OIDNode,
		"signalboxAlarmTime": OIDTime,
	} {
		out, err := exec.Command(snmptranslate, "-M", "+"+mibDir, "-m", "SIGNALBOX-MIB", "-On", "SIGNALBOX-MIB::"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("snmptranslate %s: %v\n%s", name, err, out)
		}
		// The OID is the last line: on its first run on a machine net-snmp
		// says first that it made its persistent directories.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if got := strings.TrimSpace(lines[len(lines)-1]); got != "."+oid {
			t.Errorf("MIB has %s at %s, the code sends .%s", name, got, oid)
		}
	}
	// The severities the code sends are the MIB's enumeration.
	out, err = exec.Command(snmptranslate, "-M", "+"+mibDir, "-m", "SIGNALBOX-MIB", "-Td", "SIGNALBOX-MIB::signalboxAlarmSeverity").CombinedOutput()
	if err != nil {
		t.Fatalf("snmptranslate: %v\n%s", err, out)
	}
	for sev, v := range severityValue {
		if want := fmt.Sprintf("%s(%d)", sev, v); !strings.Contains(string(out), want) {
			t.Errorf("MIB's severity enumeration lacks %s:\n%s", want, out)
		}
	}
}

// raiseAndClear raises an alarm and clears it through obs.Alarms, as the
// app wires it, and returns what snmptrapd printed for each.
func raiseAndClear(t *testing.T, n *Notifier, d *testkit.Trapd) (raised, cleared string) {
	t.Helper()
	alarms := obs.NewAlarms(nil)
	alarms.Subscribe(n.Notify)
	n.Start()
	t.Cleanup(func() { n.Stop(context.Background()) })
	long := strings.Repeat("é", 200) // 400 bytes: cut to 255 at a character boundary
	alarms.Raise("feed_disconnected", "feed/probe-a", obs.Major, "feed probe-a cannot reach 10.0.0.7:5000 "+long)
	raised = d.Next(t, 5*time.Second)
	alarms.Clear("feed_disconnected", "feed/probe-a")
	cleared = d.Next(t, 5*time.Second)
	return raised, cleared
}

func checkVarbinds(t *testing.T, line, trap, severity string) {
	t.Helper()
	for _, want := range []string{
		"SNMPv2-MIB::snmpTrapOID.0 = OID: SIGNALBOX-MIB::" + trap,
		`SIGNALBOX-MIB::signalboxAlarmId = STRING: feed/probe-a/feed_disconnected`,
		`SIGNALBOX-MIB::signalboxAlarmKind = STRING: feed_disconnected`,
		"SIGNALBOX-MIB::signalboxAlarmSeverity = INTEGER: " + severity,
		`SIGNALBOX-MIB::signalboxAlarmComponent = STRING: feed/probe-a`,
		`SIGNALBOX-MIB::signalboxAlarmText = STRING: feed probe-a cannot reach 10.0.0.7:5000 éé`,
		`SIGNALBOX-MIB::signalboxAlarmNode = STRING: node-1`,
		`SIGNALBOX-MIB::signalboxAlarmTime = STRING: ` + time.Now().UTC().Format("2006-1-2"),
	} {
		if !strings.Contains(line, want) {
			t.Errorf("notification lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "\ufffd") {
		t.Errorf("the text was cut inside a character:\n%s", line)
	}
}

func TestTrapsV2cReachSnmptrapd(t *testing.T) {
	d := testkit.SNMPTrapd(t, "authCommunity log ops-public\n", mibDir)
	reg := prometheus.NewRegistry()
	n, err := New(Config{Managers: []string{d.Addr}, Version: "2c", Community: "ops-public", Node: "node-1", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	raised, cleared := raiseAndClear(t, n, d)
	checkVarbinds(t, raised, "signalboxAlarmRaised", "major(4)")
	checkVarbinds(t, cleared, "signalboxAlarmCleared", "cleared(1)")
	// Counted once the send returns, which may be after snmptrapd printed it.
	testkit.WaitFor(t, 2*time.Second, "signalbox_snmp_notifications_total{result=sent} = 2", func() bool {
		return testutil.ToFloat64(n.sent.WithLabelValues(d.Addr, "sent")) == 2
	})

	// Another community is not logged.
	wrong, err := New(Config{Managers: []string{d.Addr}, Version: "2c", Community: "guess", Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	alarms := obs.NewAlarms(nil)
	alarms.Subscribe(wrong.Notify)
	wrong.Start()
	defer wrong.Stop(context.Background())
	alarms.Raise("store_unreachable", "store", obs.Critical, "x")
	d.None(t, time.Second)
}

func TestTrapsV3AuthPrivReachSnmptrapd(t *testing.T) {
	engine := EngineIDFromText("node-1")
	d := testkit.SNMPTrapd(t, fmt.Sprintf("createUser -e 0x%x noc SHA-256 auth-secret-1 AES priv-secret-1\nauthUser log noc priv\n", engine), mibDir)
	n, err := New(Config{Managers: []string{d.Addr}, Version: "3", User: "noc",
		AuthProtocol: "SHA-256", AuthPassword: "auth-secret-1", PrivProtocol: "AES", PrivPassword: "priv-secret-1",
		Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	n.started = time.Now().Add(-time.Hour) // engine time 3600 s
	raised, cleared := raiseAndClear(t, n, d)
	checkVarbinds(t, raised, "signalboxAlarmRaised", "major(4)")
	checkVarbinds(t, cleared, "signalboxAlarmCleared", "cleared(1)")

	// The node restarts: its engine time goes back to 0. With the same
	// engine boots the manager, which has heard the engine at 3600 s,
	// refuses it as outside the time window (RFC 3414 3.2 step 7); the
	// boots kept by NextBoots grow, and it takes them.
	boots := filepath.Join(t.TempDir(), "boots")
	for want := uint32(1); want <= 2; want++ {
		b, err := NextBoots(boots)
		if err != nil || b != want {
			t.Fatalf("NextBoots = %d, %v; want %d", b, err, want)
		}
	}
	restart := func(boots uint32) *Notifier {
		n, err := New(Config{Managers: []string{d.Addr}, Version: "3", User: "noc",
			AuthProtocol: "SHA-256", AuthPassword: "auth-secret-1", PrivProtocol: "AES", PrivPassword: "priv-secret-1",
			Node: "node-1", Boots: boots})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	stale := restart(1)
	staleAlarms := obs.NewAlarms(nil)
	staleAlarms.Subscribe(stale.Notify)
	stale.Start()
	staleAlarms.Raise("store_unreachable", "store", obs.Critical, "x")
	d.None(t, time.Second)
	stale.Stop(context.Background())
	raised, _ = raiseAndClear(t, restart(2), d)
	checkVarbinds(t, raised, "signalboxAlarmRaised", "major(4)")

	// A wrong privacy password does not get through.
	wrong, err := New(Config{Managers: []string{d.Addr}, Version: "3", User: "noc",
		AuthProtocol: "SHA-256", AuthPassword: "auth-secret-1", PrivProtocol: "AES", PrivPassword: "not-the-secret",
		EngineID: engine, Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	alarms := obs.NewAlarms(nil)
	alarms.Subscribe(wrong.Notify)
	wrong.Start()
	defer wrong.Stop(context.Background())
	alarms.Raise("store_unreachable", "store", obs.Critical, "x")
	d.None(t, time.Second)
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no managers"},
		{Config{Managers: []string{"h"}, Version: "1"}, "want 2c or 3"},
		{Config{Managers: []string{"h"}, Version: "2c"}, "community"},
		{Config{Managers: []string{"h"}, Version: "3"}, "user"},
		{Config{Managers: []string{"h"}, Version: "3", User: "u", AuthPassword: "short"}, "at least 8"},
		{Config{Managers: []string{"h"}, Version: "3", User: "u", AuthPassword: "12345678", AuthProtocol: "SHA-1024"}, "auth protocol"},
		{Config{Managers: []string{"h"}, Version: "3", User: "u", PrivPassword: "12345678"}, "needs an auth password"},
		{Config{Managers: []string{"h:0"}, Version: "2c", Community: "c"}, "bad port"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", c.cfg, err, c.want)
		}
	}
	if _, err := ParseEngineID("zz"); err == nil {
		t.Error("ParseEngineID(zz) accepted")
	}
	id, err := ParseEngineID("0x" + hex.EncodeToString(EngineIDFromText("n")))
	if err != nil || string(id) != string(EngineIDFromText("n")) {
		t.Errorf("ParseEngineID round trip: %x, %v", id, err)
	}
}

// A full queue drops and counts; Notify never waits for the network.
func TestFullQueueDrops(t *testing.T) {
	n, err := New(Config{Managers: []string{"192.0.2.1"}, Version: "2c", Community: "c", Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 5 {
		n.Notify(obs.Alarm{ID: "x", Active: true})
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Errorf("Notify took %s", d)
	}
	if got := testutil.ToFloat64(n.dropped); got != 3 {
		t.Errorf("dropped = %v, want 3", got)
	}
}
