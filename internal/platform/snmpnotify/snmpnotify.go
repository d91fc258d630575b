// Package snmpnotify sends signalbox's alarms, raised and cleared, as SNMP
// notifications (SNMPv2c or SNMPv3 USM traps) to the managers of a NOC.
// The notifications and their varbinds are those of SIGNALBOX-MIB
// (deploy/snmp/SIGNALBOX-MIB.txt); the OIDs below are held to it by a test
// that reads the MIB with net-snmp's snmptranslate.
package snmpnotify

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gosnmp/gosnmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/platform/obs"
)

// The MIB's root: enterprises.32473 is the Private Enterprise Number that
// RFC 5612 sets aside for documentation and examples; it is the one
// constant to change (here and in the MIB) when signalbox has its own PEN.
const (
	OIDMIB          = "1.3.6.1.4.1.32473.1"
	OIDAlarmRaised  = OIDMIB + ".0.1"
	OIDAlarmCleared = OIDMIB + ".0.2"
	oidAlarm        = OIDMIB + ".1.1"
	OIDAlarmID      = oidAlarm + ".1"
	OIDAlarmKind    = oidAlarm + ".2"
	OIDSeverity     = oidAlarm + ".3"
	OIDComponent    = oidAlarm + ".4"
	OIDText         = oidAlarm + ".5"
	OIDNode         = oidAlarm + ".6"
	OIDTime         = oidAlarm + ".7"

	oidSysUpTime   = "1.3.6.1.2.1.1.3.0"
	oidSnmpTrapOID = "1.3.6.1.6.3.1.1.4.1.0"
)

// Severity values of SignalboxSeverity, numbered as ItuPerceivedSeverity
// of ITU-ALARM-TC-MIB (RFC 3877).
var severityValue = map[obs.Severity]int{
	obs.Critical: 3, obs.Major: 4, obs.Minor: 5, obs.Warning: 6,
}

const severityCleared = 1

// maxText is the SIZE of SignalboxUTF8String in the MIB.
const maxText = 255

// Config says where and how to send.
type Config struct {
	// Managers are host[:port] (port 162 when omitted).
	Managers []string
	// Version is "2c" or "3".
	Version   string
	Community string // v2c
	// SNMPv3 USM: the security level follows from what is set (a privacy
	// password needs an authentication password).
	User         string
	AuthProtocol string // MD5, SHA, SHA-224, SHA-256, SHA-384, SHA-512
	AuthPassword string
	PrivProtocol string // DES, AES, AES-192, AES-256
	PrivPassword string
	// EngineID is this sender's snmpEngineID (v3; the manager's createUser
	// names it). Empty: derived from Node (RFC 3411 text format).
	EngineID []byte
	// Boots is snmpEngineBoots (v3): it must grow at every restart, or a
	// manager that has heard this engine before refuses its notifications
	// as outside the time window (RFC 3414 3.2). NextBoots keeps it in a
	// file. Zero counts as 1.
	Boots uint32
	// Node names this signalbox in every notification (signalboxAlarmNode).
	Node string
	// Queue bounds the notifications waiting to be sent (default 1000);
	// past it they are dropped and counted, the alarm itself unaffected.
	Queue      int
	Timeout    time.Duration // per send (default 2 s)
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Notifier sends alarm notifications from a bounded queue.
type Notifier struct {
	cfg      Config
	targets  []*target
	queue    chan obs.Alarm
	started  time.Time
	sent     *prometheus.CounterVec
	dropped  prometheus.Counter
	log      *slog.Logger
	wg       sync.WaitGroup
	stopOnce sync.Once
	stop     chan struct{}
}

type target struct {
	name string
	mu   sync.Mutex
	snmp *gosnmp.GoSNMP
	usm  *gosnmp.UsmSecurityParameters
	conn bool
}

var authProtocols = map[string]gosnmp.SnmpV3AuthProtocol{
	"MD5": gosnmp.MD5, "SHA": gosnmp.SHA, "SHA-224": gosnmp.SHA224, "SHA-256": gosnmp.SHA256,
	"SHA-384": gosnmp.SHA384, "SHA-512": gosnmp.SHA512,
}

var privProtocols = map[string]gosnmp.SnmpV3PrivProtocol{
	"DES": gosnmp.DES, "AES": gosnmp.AES, "AES-192": gosnmp.AES192, "AES-256": gosnmp.AES256,
}

// EngineIDFromText is an RFC 3411 snmpEngineID in the text format under
// the MIB's enterprise number: 0x80 00 7E 99 | 04 | up to 27 bytes of text.
func EngineIDFromText(text string) []byte {
	if len(text) > 27 {
		text = text[:27]
	}
	if text == "" {
		text = "signalbox"
	}
	return append([]byte{0x80, 0x00, 0x7e, 0xd9, 0x04}, text...)
}

// NextBoots reads snmpEngineBoots from path, adds one, and writes it back
// (the file is created at 1); it is called once per start.
func NextBoots(path string) (uint32, error) {
	var boots uint64
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		boots, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 31)
		if err != nil {
			return 0, fmt.Errorf("snmp engine boots in %s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("snmp engine boots: %w", err)
	}
	// RFC 3414 2.2.2: at 2147483647 the engine stays there (and needs new
	// keys); nobody restarts that often.
	boots = min(boots+1, 1<<31-1)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(boots, 10)+"\n"), 0o640); err != nil {
		return 0, fmt.Errorf("snmp engine boots: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("snmp engine boots: %w", err)
	}
	return uint32(boots), nil
}

// ParseEngineID reads an engine ID written in hex (with or without 0x),
// as snmptrapd's createUser -e takes it.
func ParseEngineID(s string) ([]byte, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("snmp engine id %q: not hex: %w", s, err)
	}
	if len(b) < 5 || len(b) > 32 {
		return nil, fmt.Errorf("snmp engine id %q: %d bytes, RFC 3411 wants 5 to 32", s, len(b))
	}
	return b, nil
}

// New checks cfg and prepares one sender per manager; nothing is sent
// before Start.
func New(cfg Config) (*Notifier, error) {
	if len(cfg.Managers) == 0 {
		return nil, errors.New("snmp: no managers")
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1000
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{cfg: cfg, queue: make(chan obs.Alarm, cfg.Queue), stop: make(chan struct{}),
		started: time.Now(), log: cfg.Logger}
	// base is copied for each manager before any use.
	base := struct {
		Version       gosnmp.SnmpVersion
		Community     string
		SecurityModel gosnmp.SnmpV3SecurityModel
		MsgFlags      gosnmp.SnmpV3MsgFlags
	}{}
	var usm *gosnmp.UsmSecurityParameters
	switch cfg.Version {
	case "2c", "":
		base.Version = gosnmp.Version2c
		base.Community = cfg.Community
		if base.Community == "" {
			return nil, errors.New("snmp: SNMPv2c needs a community")
		}
	case "3":
		base.Version = gosnmp.Version3
		base.SecurityModel = gosnmp.UserSecurityModel
		if cfg.User == "" {
			return nil, errors.New("snmp: SNMPv3 needs a user name")
		}
		engine := cfg.EngineID
		if len(engine) == 0 {
			engine = EngineIDFromText(cfg.Node)
		}
		usm = &gosnmp.UsmSecurityParameters{UserName: cfg.User, AuthoritativeEngineID: string(engine),
			AuthoritativeEngineBoots: max(cfg.Boots, 1)}
		base.MsgFlags = gosnmp.NoAuthNoPriv
		if cfg.AuthPassword != "" {
			p, ok := authProtocols[strings.ToUpper(orDefault(cfg.AuthProtocol, "SHA-256"))]
			if !ok {
				return nil, fmt.Errorf("snmp: auth protocol %q: want MD5, SHA, SHA-224, SHA-256, SHA-384 or SHA-512", cfg.AuthProtocol)
			}
			if len(cfg.AuthPassword) < 8 {
				return nil, errors.New("snmp: the auth password must have at least 8 characters (RFC 3414)")
			}
			usm.AuthenticationProtocol, usm.AuthenticationPassphrase = p, cfg.AuthPassword
			base.MsgFlags = gosnmp.AuthNoPriv
		} else {
			usm.AuthenticationProtocol = gosnmp.NoAuth
		}
		usm.PrivacyProtocol = gosnmp.NoPriv
		if cfg.PrivPassword != "" {
			if cfg.AuthPassword == "" {
				return nil, errors.New("snmp: a privacy password needs an auth password (USM has no privacy without authentication)")
			}
			p, ok := privProtocols[strings.ToUpper(orDefault(cfg.PrivProtocol, "AES"))]
			if !ok {
				return nil, fmt.Errorf("snmp: privacy protocol %q: want DES, AES, AES-192 or AES-256", cfg.PrivProtocol)
			}
			if len(cfg.PrivPassword) < 8 {
				return nil, errors.New("snmp: the privacy password must have at least 8 characters (RFC 3414)")
			}
			usm.PrivacyProtocol, usm.PrivacyPassphrase = p, cfg.PrivPassword
			base.MsgFlags = gosnmp.AuthPriv
		}
	default:
		return nil, fmt.Errorf("snmp: version %q: want 2c or 3", cfg.Version)
	}
	for _, m := range cfg.Managers {
		host, port, err := splitManager(m)
		if err != nil {
			return nil, err
		}
		s := &gosnmp.GoSNMP{Target: host, Port: port, Transport: "udp", Timeout: cfg.Timeout,
			MaxOids: gosnmp.MaxOids, Version: base.Version, Community: base.Community,
			SecurityModel: base.SecurityModel, MsgFlags: base.MsgFlags}
		t := &target{name: net.JoinHostPort(host, strconv.Itoa(int(port))), snmp: s}
		if usm != nil {
			t.usm = &gosnmp.UsmSecurityParameters{UserName: usm.UserName,
				AuthoritativeEngineID: usm.AuthoritativeEngineID, AuthoritativeEngineBoots: usm.AuthoritativeEngineBoots,
				AuthenticationProtocol: usm.AuthenticationProtocol, AuthenticationPassphrase: usm.AuthenticationPassphrase,
				PrivacyProtocol: usm.PrivacyProtocol, PrivacyPassphrase: usm.PrivacyPassphrase}
			s.SecurityParameters = t.usm
		}
		n.targets = append(n.targets, t)
	}
	n.sent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_snmp_notifications_total",
		Help: "SNMP alarm notifications by manager and result (sent, failed).",
	}, []string{"manager", "result"})
	n.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "signalbox_snmp_notifications_dropped_total",
		Help: "SNMP alarm notifications dropped because the send queue was full.",
	})
	for _, t := range n.targets {
		n.sent.WithLabelValues(t.name, "sent").Add(0)
		n.sent.WithLabelValues(t.name, "failed").Add(0)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(n.sent); err != nil {
			return nil, fmt.Errorf("snmp: register metrics: %w", err)
		}
		if err := cfg.Registerer.Register(n.dropped); err != nil {
			return nil, fmt.Errorf("snmp: register metrics: %w", err)
		}
	}
	return n, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func splitManager(m string) (string, uint16, error) {
	m = strings.TrimSpace(m)
	host, portS, err := net.SplitHostPort(m)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(m, "[]"), 162, nil
		}
		return "", 0, fmt.Errorf("snmp manager %q: %w", m, err)
	}
	p, err := strconv.ParseUint(portS, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("snmp manager %q: bad port", m)
	}
	return host, uint16(p), nil
}

// Start sends queued notifications until Stop.
func (n *Notifier) Start() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			select {
			case a := <-n.queue:
				n.send(a)
			case <-n.stop:
				// Whatever is queued at shutdown is sent, within the
				// senders' timeouts.
				for {
					select {
					case a := <-n.queue:
						n.send(a)
					default:
						return
					}
				}
			}
		}
	}()
}

// Stop sends what is queued and closes the sockets.
func (n *Notifier) Stop(ctx context.Context) {
	n.stopOnce.Do(func() { close(n.stop) })
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	for _, t := range n.targets {
		t.mu.Lock()
		if t.conn && t.snmp.Conn != nil {
			_ = t.snmp.Conn.Close()
		}
		t.mu.Unlock()
	}
}

// Notify queues a notification for an alarm raised (a.Active) or cleared.
// It never blocks: a full queue drops and counts.
func (n *Notifier) Notify(a obs.Alarm) {
	select {
	case n.queue <- a:
	default:
		n.dropped.Inc()
	}
}

// Varbinds returns the notification for a, after sysUpTime: its
// snmpTrapOID and the MIB's objects, in the MIB's order.
func (n *Notifier) Varbinds(a obs.Alarm, uptime time.Duration) []gosnmp.SnmpPDU {
	trap, sev, at := OIDAlarmRaised, severityValue[a.Severity], a.FirstSeen
	if !a.Active {
		trap, sev = OIDAlarmCleared, severityCleared
		if a.ClearedAt != nil {
			at = *a.ClearedAt
		}
	}
	if sev == 0 {
		sev = 2 // indeterminate
	}
	return []gosnmp.SnmpPDU{
		{Name: oidSysUpTime, Type: gosnmp.TimeTicks, Value: uint32(uptime / (10 * time.Millisecond))},
		{Name: oidSnmpTrapOID, Type: gosnmp.ObjectIdentifier, Value: trap},
		{Name: OIDAlarmID, Type: gosnmp.OctetString, Value: text(a.ID)},
		{Name: OIDAlarmKind, Type: gosnmp.OctetString, Value: text(a.Kind)},
		{Name: OIDSeverity, Type: gosnmp.Integer, Value: sev},
		{Name: OIDComponent, Type: gosnmp.OctetString, Value: text(a.Source)},
		{Name: OIDText, Type: gosnmp.OctetString, Value: text(a.Description)},
		{Name: OIDNode, Type: gosnmp.OctetString, Value: text(n.cfg.Node)},
		{Name: OIDTime, Type: gosnmp.OctetString, Value: DateAndTime(at)},
	}
}

// text cuts s to the MIB's SIZE at a character boundary.
func text(s string) string {
	if len(s) <= maxText {
		return s
	}
	i := maxText
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}

// DateAndTime encodes t as SNMPv2-TC's DateAndTime, 11 octets in UTC.
func DateAndTime(t time.Time) []byte {
	t = t.UTC()
	y := t.Year()
	return []byte{byte(y >> 8), byte(y), byte(t.Month()), byte(t.Day()), byte(t.Hour()),
		byte(t.Minute()), byte(t.Second()), byte(t.Nanosecond() / 100_000_000), '+', 0, 0}
}

func (n *Notifier) send(a obs.Alarm) {
	up := time.Since(n.started)
	vbs := n.Varbinds(a, up)
	for _, t := range n.targets {
		err := t.send(vbs, up)
		if err != nil {
			n.sent.WithLabelValues(t.name, "failed").Inc()
			n.log.Warn("snmp notification not sent", "manager", t.name, "alarm", a.ID, "err", err)
			continue
		}
		n.sent.WithLabelValues(t.name, "sent").Inc()
	}
}

func (t *target) send(vbs []gosnmp.SnmpPDU, up time.Duration) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.conn {
		if err := t.snmp.Connect(); err != nil {
			return err
		}
		t.conn = true
	}
	if t.usm != nil {
		// The sender of a notification is the authoritative engine: its
		// time is its own uptime (RFC 3414 2.2).
		t.usm.AuthoritativeEngineTime = uint32(up / time.Second)
	}
	_, err := t.snmp.SendTrap(gosnmp.SnmpTrap{Variables: vbs})
	return err
}
