package api

import (
	"encoding/json"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// JSON shapes of E2B's API, named after its schemas. Field names are the
// wire's: camelCase, except allow_internet_access on requests.

type newSandboxJSON struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *autoResumeJSON   `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkJSON      `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	VolumeMounts        []volumeMountJSON `json:"volumeMounts"`
	IAM                 *iamJSON          `json:"iam"`
}

// iamJSON is E2B's SandboxIam.
type iamJSON struct {
	Tokens map[string]iamTokenJSON `json:"tokens"`
}

type iamTokenJSON struct {
	Audience  string `json:"audience"`
	TokenType string `json:"tokenType"`
}

func iamIn(in *iamJSON) sandbox.IAM {
	if in == nil || len(in.Tokens) == 0 {
		return sandbox.IAM{}
	}
	out := sandbox.IAM{Tokens: make(map[string]sandbox.IAMToken, len(in.Tokens))}
	for name, t := range in.Tokens {
		out.Tokens[name] = sandbox.IAMToken{Audience: t.Audience, TokenType: t.TokenType}
	}
	return out
}

// volumeMountJSON is E2B's SandboxVolumeMount.
type volumeMountJSON struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

type autoResumeJSON struct {
	Enabled bool `json:"enabled"`
}

type networkJSON struct {
	AllowPublicTraffic *bool                 `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string              `json:"allowOut,omitempty"`
	DenyOut            []string              `json:"denyOut,omitempty"`
	EgressProxy        *egressProxyJSON      `json:"egressProxy,omitempty"`
	MaskRequestHost    string                `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int                 `json:"httpsPorts,omitempty"`
	Rules              map[string][]ruleJSON `json:"rules,omitempty"`
	// Only in SandboxNetworkUpdateConfig.
	AllowInternetAccess *bool `json:"allow_internet_access,omitempty"`
}

type egressProxyJSON struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"` // accepted, never returned
}

type ruleJSON struct {
	Transform struct {
		Headers map[string]string `json:"headers,omitempty"`
	} `json:"transform"`
}

// sandboxJSON is E2B's Sandbox: what create, connect, resume and fork
// return.
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedSandboxJSON is E2B's ListedSandbox.
type listedSandboxJSON struct {
	TemplateID string            `json:"templateID"`
	Alias      string            `json:"alias,omitempty"`
	SandboxID  string            `json:"sandboxID"`
	ClientID   string            `json:"clientID"`
	StartedAt  time.Time         `json:"startedAt"`
	EndAt      time.Time         `json:"endAt"`
	CPUCount   int               `json:"cpuCount"`
	MemoryMB   int               `json:"memoryMB"`
	DiskSizeMB int               `json:"diskSizeMB"`
	Metadata   map[string]string `json:"metadata"`
	State      string            `json:"state"`
	// PauseMode is Warren's own: frozen, stopped or checkpointed while
	// paused, else absent.
	PauseMode    string            `json:"pauseMode,omitempty"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []volumeMountJSON `json:"volumeMounts"`
}

// sandboxDetailJSON is E2B's SandboxDetail (GET /sandboxes/{id}).
type sandboxDetailJSON struct {
	listedSandboxJSON
	EnvdAccessToken     string        `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool         `json:"allowInternetAccess"`
	Domain              *string       `json:"domain"`
	Network             networkJSON   `json:"network"`
	Lifecycle           lifecycleJSON `json:"lifecycle"`
}

type lifecycleJSON struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

type metricJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

type snapshotJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

type logEntryJSON struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

func (s *server) sandboxJSON(sb sandbox.Sandbox) sandboxJSON {
	out := sandboxJSON{
		TemplateID:      sb.TemplateID,
		SandboxID:       sb.ID,
		Alias:           sb.Alias,
		ClientID:        ClientID,
		EnvdVersion:     s.envdVer,
		EnvdAccessToken: sb.EnvdAccessToken,
	}
	if sb.TrafficAccessToken != "" {
		out.TrafficAccessToken = &sb.TrafficAccessToken
	}
	return out
}

func (s *server) listedJSON(sb sandbox.Sandbox) listedSandboxJSON {
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return listedSandboxJSON{
		TemplateID:   sb.TemplateID,
		Alias:        sb.Alias,
		SandboxID:    sb.ID,
		ClientID:     ClientID,
		StartedAt:    sb.StartedAt.UTC(),
		EndAt:        sb.EndAt.UTC(),
		CPUCount:     sb.CPUCount,
		MemoryMB:     sb.MemoryMB,
		DiskSizeMB:   sb.DiskSizeMB,
		Metadata:     md,
		State:        string(sb.State),
		PauseMode:    string(sb.PauseMode),
		EnvdVersion:  s.envdVer,
		VolumeMounts: volumeMountsOut(sb.VolumeMounts),
	}
}

func (s *server) detailJSON(sb sandbox.Sandbox) sandboxDetailJSON {
	onTimeout := string(sb.Lifecycle.OnTimeout)
	if onTimeout == "" {
		onTimeout = string(sandbox.TimeoutKill)
	}
	return sandboxDetailJSON{
		listedSandboxJSON:   s.listedJSON(sb),
		EnvdAccessToken:     sb.EnvdAccessToken,
		AllowInternetAccess: &sb.Network.AllowInternetAccess,
		Network:             networkOut(sb.Network),
		Lifecycle:           lifecycleJSON{AutoResume: sb.Lifecycle.AutoResume, OnTimeout: onTimeout},
	}
}

// networkIn converts a request's network settings; absent fields take
// E2B's defaults (public traffic and internet access allowed).
func networkIn(n *networkJSON, allowInternet *bool) sandbox.Network {
	out := sandbox.Network{AllowPublicTraffic: true, AllowInternetAccess: true}
	if allowInternet != nil {
		out.AllowInternetAccess = *allowInternet
	}
	if n == nil {
		return out
	}
	if n.AllowPublicTraffic != nil {
		out.AllowPublicTraffic = *n.AllowPublicTraffic
	}
	if n.AllowInternetAccess != nil {
		out.AllowInternetAccess = *n.AllowInternetAccess
	}
	out.AllowOut, out.DenyOut = n.AllowOut, n.DenyOut
	out.MaskRequestHost, out.HTTPSPorts = n.MaskRequestHost, n.HTTPSPorts
	if n.EgressProxy != nil {
		out.EgressProxy = &sandbox.EgressProxy{Address: n.EgressProxy.Address, Username: n.EgressProxy.Username, Password: n.EgressProxy.Password}
	}
	if len(n.Rules) > 0 {
		out.Rules = map[string][]sandbox.NetworkRule{}
		for domain, rules := range n.Rules {
			list := make([]sandbox.NetworkRule, 0, len(rules))
			for _, r := range rules {
				list = append(list, sandbox.NetworkRule{Headers: r.Transform.Headers})
			}
			out.Rules[domain] = list
		}
	}
	return out
}

// networkOut reports a sandbox's network settings, never the proxy password.
func networkOut(n sandbox.Network) networkJSON {
	out := networkJSON{
		AllowPublicTraffic: &n.AllowPublicTraffic,
		AllowOut:           n.AllowOut,
		DenyOut:            n.DenyOut,
		MaskRequestHost:    n.MaskRequestHost,
		HTTPSPorts:         n.HTTPSPorts,
	}
	if n.EgressProxy != nil {
		out.EgressProxy = &egressProxyJSON{Address: n.EgressProxy.Address, Username: n.EgressProxy.Username}
	}
	if len(n.Rules) > 0 {
		out.Rules = map[string][]ruleJSON{}
		for domain, rules := range n.Rules {
			list := make([]ruleJSON, 0, len(rules))
			for _, r := range rules {
				var rj ruleJSON
				rj.Transform.Headers = r.Headers
				list = append(list, rj)
			}
			out.Rules[domain] = list
		}
	}
	return out
}

func metricOut(st sandbox.Stats) metricJSON {
	return metricJSON{
		Timestamp:     st.Time.UTC(),
		TimestampUnix: st.Time.Unix(),
		CPUCount:      st.CPUCount,
		CPUUsedPct:    st.CPUUsedPct,
		MemUsed:       st.MemUsed,
		MemTotal:      st.MemTotal,
		MemCache:      st.MemCache,
		DiskUsed:      st.DiskUsed,
		DiskTotal:     st.DiskTotal,
	}
}

func snapshotOut(sn sandbox.Snapshot) snapshotJSON {
	names := []string{}
	if sn.Name != "" {
		names = append(names, sn.Name)
	}
	return snapshotJSON{SnapshotID: sn.ID, Names: names}
}

// logLineV1 is an entry as the line of a v1 log: a JSON object as E2B's
// agent logs them, which the e2b CLI parses (level, logger, message, and
// the entry's fields). Events of the sandbox's life come from the logger
// "lifecycle", lines of our agent from "agent".
func logLineV1(e sandbox.LogEntry) string {
	rec := map[string]string{"logger": "lifecycle"}
	for k, v := range e.Fields {
		rec[k] = v
	}
	if src, ok := rec["source"]; ok {
		rec["logger"] = src
		delete(rec, "source")
	}
	rec["level"], rec["message"] = e.Level, e.Message
	b, _ := json.Marshal(rec)
	return string(b)
}

func logOut(e sandbox.LogEntry) logEntryJSON {
	f := e.Fields
	if f == nil {
		f = map[string]string{}
	}
	return logEntryJSON{Timestamp: e.Time.UTC(), Level: e.Level, Message: e.Message, Fields: f}
}
