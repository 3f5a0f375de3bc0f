package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/doubletake/doubletake/internal/cli"
)

var update = flag.Bool("update", false, "rewrite the generated files (kubernetes/prometheusrule.yaml)")

// testEnv is what the pod's environment gives the configs and the args: the
// downward API's pod IP and the upstream a user sets.
var testEnv = map[string]string{
	"MY_POD_IP":         "127.0.0.1",
	"POD_IP":            "127.0.0.1",
	"UPSTREAM_ENDPOINT": "127.0.0.1:4317",
}

// dataDir is where every manifest mounts the data dir, and where the image
// has its volume (Containerfile).
const dataDir = "/var/lib/doubletake"

// object is one decoded Kubernetes manifest.
type object struct {
	kind, name string
	value      any
}

// typedKinds are the Kubernetes kinds the manifests use, with the API
// version each must name and a constructor of its Go type.
var typedKinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Service":        {"v1", func() any { return &corev1.Service{} }},
	"ConfigMap":      {"v1", func() any { return &corev1.ConfigMap{} }},
	"ServiceAccount": {"v1", func() any { return &corev1.ServiceAccount{} }},
	"StatefulSet":    {"apps/v1", func() any { return &appsv1.StatefulSet{} }},
	"Deployment":     {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"Role":           {"rbac.authorization.k8s.io/v1", func() any { return &rbacv1.Role{} }},
	"RoleBinding":    {"rbac.authorization.k8s.io/v1", func() any { return &rbacv1.RoleBinding{} }},
}

// splitDocs returns the YAML documents of a multi-document file.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// decodeManifests decodes every document of file strictly (an unknown or
// repeated field fails) into its Kubernetes API type.
func decodeManifests(t *testing.T, file string) []object {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	for i, doc := range splitDocs(b) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: document %d: %v", file, i+1, err)
		}
		k, ok := typedKinds[meta.Kind]
		if !ok {
			t.Fatalf("%s: document %d: kind %q has no API type in this test", file, i+1, meta.Kind)
		}
		if meta.APIVersion != k.apiVersion {
			t.Errorf("%s: %s %s: apiVersion %q, want %q", file, meta.Kind, meta.Metadata.Name, meta.APIVersion, k.apiVersion)
		}
		v := k.new()
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			t.Fatalf("%s: %s %s: %v", file, meta.Kind, meta.Metadata.Name, err)
		}
		if meta.Metadata.Name == "" {
			t.Errorf("%s: a %s without a name", file, meta.Kind)
		}
		objs = append(objs, object{meta.Kind, meta.Metadata.Name, v})
	}
	return objs
}

// expandK8s expands $(VAR) in a container's args as the kubelet does, from
// the container's env: a literal value, or the test's value for one the
// downward API sets.
func expandK8s(t *testing.T, s string, env []corev1.EnvVar) string {
	t.Helper()
	return regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		for _, e := range env {
			if e.Name != name {
				continue
			}
			if e.ValueFrom != nil {
				v, ok := testEnv[name]
				if !ok {
					t.Fatalf("$(%s) comes from the downward API; the test has no value for it", name)
				}
				return v
			}
			return e.Value
		}
		t.Fatalf("$(%s) in the args is not in the container's env", name)
		return ""
	})
}

// validateConfig runs `doubletake validate --config=FILE` (a collector's
// command line, as the chart and the Operator give it) with the pod's
// environment.
func validateConfig(t *testing.T, what, config string) {
	t.Helper()
	for k, v := range testEnv {
		t.Setenv(k, v)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"validate", "--config=" + file}, cli.Streams{Out: &out, Err: &errb}); code != cli.ExitOK {
		t.Errorf("%s: doubletake validate: exit %d: %s\n%s", what, code, errb.String(), config)
	}
}

// defaultConfigOf renders the embedded default with a `run` container's
// flags, as that container would run it.
func defaultConfigOf(t *testing.T, what string, args []string) string {
	t.Helper()
	var out, errb bytes.Buffer
	argv := append([]string{"run", "default-config"}, args[1:]...)
	if code := cli.Main(argv, cli.Streams{Out: &out, Err: &errb}); code != cli.ExitOK {
		t.Fatalf("%s: doubletake %s: exit %d: %s", what, strings.Join(argv, " "), code, errb.String())
	}
	return out.String()
}

// podCheck checks one pod template: the image's user, the data dir's
// volume, the probes' and Services' named ports, and the config each
// container runs (validated).
func podCheck(t *testing.T, what string, pod corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim, configMaps map[string]*corev1.ConfigMap) {
	t.Helper()
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 10001 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: the pod must run as the image's user 10001, non-root", what)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range claims {
		volumes[c.Name] = corev1.Volume{Name: c.Name}
	}
	for _, c := range pod.Spec.Containers {
		what := what + " container " + c.Name
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if probe == nil || probe.HTTPGet == nil {
				t.Errorf("%s: needs HTTP readiness and liveness probes on the health check", what)
				continue
			}
			if p := probe.HTTPGet.Port.String(); ports[p] != 13133 {
				t.Errorf("%s: probe port %q is not the health check's 13133", what, p)
			}
		}
		mounts := map[string]string{} // path -> volume
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s: mounts volume %q, which the pod does not have", what, m.Name)
			}
			mounts[m.MountPath] = m.Name
		}
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = expandK8s(t, a, c.Env)
		}
		switch {
		case len(args) > 0 && args[0] == "run":
			// The embedded default with flags: its data dir must be the
			// volume claim.
			if !slices.Contains(args, "--data-dir="+dataDir) {
				t.Errorf("%s: runs the embedded default without --data-dir=%s", what, dataDir)
			}
			if v := mounts[dataDir]; !slices.ContainsFunc(claims, func(c corev1.PersistentVolumeClaim) bool { return c.Name == v }) {
				t.Errorf("%s: %s is not a volume claim (mounted: %q): the queue and the journals would not survive a reschedule", what, dataDir, v)
			}
			validateConfig(t, what, defaultConfigOf(t, what, args))
		case len(args) > 0 && strings.HasPrefix(args[0], "--config="):
			path := strings.TrimPrefix(args[0], "--config=")
			dir, key := filepath.Split(path)
			vol, ok := volumes[mounts[filepath.Clean(dir)]]
			if !ok || vol.ConfigMap == nil {
				t.Fatalf("%s: --config=%s is not in a ConfigMap volume", what, path)
			}
			cm, ok := configMaps[vol.ConfigMap.Name]
			if !ok {
				t.Fatalf("%s: ConfigMap %q is not in the manifests", what, vol.ConfigMap.Name)
			}
			config, ok := cm.Data[key]
			if !ok {
				t.Fatalf("%s: ConfigMap %q has no key %q", what, cm.Name, key)
			}
			validateConfig(t, what, config)
		default:
			t.Errorf("%s: args %q are neither `run ...` nor a collector's --config", what, args)
		}
	}
}

// checkManifests decodes file and checks every workload and Service in it.
func checkManifests(t *testing.T, file string) map[string]any {
	objs := decodeManifests(t, file)
	byName := map[string]any{}
	configMaps := map[string]*corev1.ConfigMap{}
	var pods []struct {
		name   string
		labels map[string]string
	}
	for _, o := range objs {
		byName[o.kind+"/"+o.name] = o.value
		if cm, ok := o.value.(*corev1.ConfigMap); ok {
			configMaps[cm.Name] = cm
		}
	}
	for _, o := range objs {
		what := file + ": " + o.kind + " " + o.name
		switch v := o.value.(type) {
		case *appsv1.StatefulSet:
			if len(v.Spec.VolumeClaimTemplates) == 0 {
				t.Errorf("%s: no volume claim for the data dir", what)
			}
			svc, ok := byName["Service/"+v.Spec.ServiceName].(*corev1.Service)
			if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("%s: serviceName %q is not a headless Service in the file", what, v.Spec.ServiceName)
			}
			podCheck(t, what, v.Spec.Template, v.Spec.VolumeClaimTemplates, configMaps)
			pods = append(pods, struct {
				name   string
				labels map[string]string
			}{o.name, v.Spec.Template.Labels})
		case *appsv1.Deployment:
			podCheck(t, what, v.Spec.Template, nil, configMaps)
			if sa := v.Spec.Template.Spec.ServiceAccountName; sa != "" {
				if _, ok := byName["ServiceAccount/"+sa]; !ok {
					t.Errorf("%s: service account %q is not in the file", what, sa)
				}
			}
			pods = append(pods, struct {
				name   string
				labels map[string]string
			}{o.name, v.Spec.Template.Labels})
		}
	}
	// Every Service selects the pods of a workload in the file.
	for _, o := range objs {
		svc, ok := o.value.(*corev1.Service)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(pods, func(p struct {
			name   string
			labels map[string]string
		}) bool {
			for k, v := range svc.Spec.Selector {
				if p.labels[k] != v {
					return false
				}
			}
			return len(svc.Spec.Selector) > 0
		}) {
			t.Errorf("%s: Service %s selects no workload's pods", file, svc.Name)
		}
	}
	return byName
}

func TestKubernetesGateway(t *testing.T) {
	objs := checkManifests(t, filepath.Join("kubernetes", "gateway.yaml"))
	sts, ok := objs["StatefulSet/doubletake"].(*appsv1.StatefulSet)
	if !ok {
		t.Fatal("gateway.yaml has no StatefulSet doubletake")
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("the single gateway must have one replica: dedup's state is per pod")
	}
}

// TestKubernetesScaleOut: the front's loadbalancing exporters resolve the
// dedup tier's headless Service, route as examples/scale-out does, and the
// front's service account may read its EndpointSlices.
func TestKubernetesScaleOut(t *testing.T) {
	objs := checkManifests(t, filepath.Join("kubernetes", "scale-out.yaml"))
	svc, ok := objs["Service/doubletake-dedup"].(*corev1.Service)
	if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatal("scale-out.yaml has no headless Service doubletake-dedup")
	}
	cm, ok := objs["ConfigMap/doubletake-front"].(*corev1.ConfigMap)
	if !ok {
		t.Fatal("scale-out.yaml has no ConfigMap doubletake-front")
	}
	var front struct {
		Exporters map[string]struct {
			RoutingKey string `json:"routing_key"`
			Resolver   struct {
				K8s *struct {
					Service string  `json:"service"`
					Ports   []int32 `json:"ports"`
				} `json:"k8s"`
			} `json:"resolver"`
		} `json:"exporters"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["front.yaml"]), &front); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"loadbalancing/traces": "traceID", "loadbalancing/metrics": "streamID", "loadbalancing/logs": "resource"}
	for name, key := range want {
		e, ok := front.Exporters[name]
		if !ok {
			t.Errorf("front.yaml has no %s", name)
			continue
		}
		if e.RoutingKey != key {
			t.Errorf("%s routes by %q, want %q", name, e.RoutingKey, key)
		}
		if e.Resolver.K8s == nil || e.Resolver.K8s.Service != svc.Name || !slices.Equal(e.Resolver.K8s.Ports, []int32{svc.Spec.Ports[0].Port}) {
			t.Errorf("%s does not resolve the k8s Service %s on port %d", name, svc.Name, svc.Spec.Ports[0].Port)
		}
	}
	role, ok := objs["Role/doubletake-front"].(*rbacv1.Role)
	if !ok || !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "discovery.k8s.io") && slices.Contains(r.Resources, "endpointslices") &&
			slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") && slices.Contains(r.Verbs, "get")
	}) {
		t.Error("the front's Role must allow get, list and watch on endpointslices (the k8s resolver's RBAC requirement)")
	}
	rb, ok := objs["RoleBinding/doubletake-front"].(*rbacv1.RoleBinding)
	if !ok || rb.RoleRef.Name != "doubletake-front" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "doubletake-front" {
		t.Error("the RoleBinding must bind the Role to the front's service account")
	}
}

// chartValues mirrors the opentelemetry-collector chart's values that
// deploy/helm/values.yaml sets; strict decoding fails on any other.
type chartValues struct {
	Mode         string `json:"mode"`
	ReplicaCount int    `json:"replicaCount"`
	Image        struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	} `json:"image"`
	Command struct {
		Name      string   `json:"name"`
		ExtraArgs []string `json:"extraArgs"`
	} `json:"command"`
	AlternateConfig map[string]any  `json:"alternateConfig"`
	ExtraEnvs       []corev1.EnvVar `json:"extraEnvs"`
	Statefulset     struct {
		VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates"`
	} `json:"statefulset"`
	ExtraVolumeMounts  []corev1.VolumeMount        `json:"extraVolumeMounts"`
	PodSecurityContext corev1.PodSecurityContext   `json:"podSecurityContext"`
	SecurityContext    corev1.SecurityContext      `json:"securityContext"`
	Resources          corev1.ResourceRequirements `json:"resources"`
	Ports              map[string]struct {
		Enabled       bool   `json:"enabled"`
		ContainerPort int32  `json:"containerPort"`
		ServicePort   int32  `json:"servicePort"`
		Protocol      string `json:"protocol"`
	} `json:"ports"`
}

func readChartValues(t *testing.T) chartValues {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("helm", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v chartValues
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("helm/values.yaml: %v", err)
	}
	return v
}

// chartContainer is the command line the chart's pod template
// (templates/_pod.tpl) gives the collector container.
func chartContainer(v chartValues) (command, args []string) {
	if v.Command.Name != "" {
		command = []string{"/" + v.Command.Name}
	}
	return command, append([]string{"--config=/conf/relay.yaml"}, v.Command.ExtraArgs...)
}

// operatorCollector mirrors the OpenTelemetryCollector (v1beta1) fields
// deploy/operator/collector.yaml sets; strict decoding fails on any other.
type operatorCollector struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Mode                 string                         `json:"mode"`
		Replicas             *int32                         `json:"replicas"`
		Image                string                         `json:"image"`
		UpgradeStrategy      string                         `json:"upgradeStrategy"`
		Command              []string                       `json:"command"`
		Args                 map[string]string              `json:"args"`
		Env                  []corev1.EnvVar                `json:"env"`
		PodSecurityContext   corev1.PodSecurityContext      `json:"podSecurityContext"`
		SecurityContext      corev1.SecurityContext         `json:"securityContext"`
		Resources            corev1.ResourceRequirements    `json:"resources"`
		VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates"`
		VolumeMounts         []corev1.VolumeMount           `json:"volumeMounts"`
		Ports                []corev1.ServicePort           `json:"ports"`
		Config               map[string]any                 `json:"config"`
	} `json:"spec"`
}

func readOperatorCollector(t *testing.T) operatorCollector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("operator", "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c operatorCollector
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("operator/collector.yaml: %v", err)
	}
	return c
}

// operatorContainer is the command line the Operator gives the collector
// container (internal/manifests/collector/container.go): spec.command (the
// image's entrypoint when empty), --config=/conf/collector.yaml, then
// spec.args as sorted --key=value.
func operatorContainer(c operatorCollector) (command, args []string) {
	var extra []string
	for k, v := range c.Spec.Args {
		extra = append(extra, fmt.Sprintf("--%s=%s", k, v))
	}
	slices.Sort(extra)
	return c.Spec.Command, append([]string{"--config=/conf/collector.yaml"}, extra...)
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkDataVolume: the data dir is a volume claim, mounted where the
// config keeps the queue and the journals: in log_storage, laid out on it
// as the embedded default lays out its --data-dir (log_storage in log/, an
// earlier file_storage's files moved in from queue/), and nothing stored
// in file_storage.
func checkDataVolume(t *testing.T, what string, claims []corev1.PersistentVolumeClaim, mounts []corev1.VolumeMount, config map[string]any) {
	t.Helper()
	m := slices.IndexFunc(mounts, func(m corev1.VolumeMount) bool { return m.MountPath == dataDir })
	if m < 0 || !slices.ContainsFunc(claims, func(c corev1.PersistentVolumeClaim) bool { return c.Name == mounts[m].Name }) {
		t.Errorf("%s: %s is not a volume claim", what, dataDir)
	}
	want := defaultLogStorage(t)
	ext, _ := config["extensions"].(map[string]any)
	ls, _ := ext["log_storage"].(map[string]any)
	for _, key := range []string{"directory", "file_storage_directory"} {
		if got, _ := ls[key].(string); got != want[key] || !strings.HasPrefix(got, dataDir+"/") {
			t.Errorf("%s: log_storage's %s is %q; the embedded default with --data-dir=%s has %q", what, key, got, dataDir, want[key])
		}
	}
	for id := range ext {
		if typ, _, _ := strings.Cut(id, "/"); typ == "file_storage" {
			t.Errorf("%s: has %s; the queue and the journals belong in log_storage, as in the embedded default", what, id)
		}
	}
	// Every storage setting names log_storage.
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if k == "storage" {
					if sub != "log_storage" {
						t.Errorf("%s: %s.storage is %v, want log_storage", what, path, sub)
					}
					continue
				}
				walk(path+"."+k, sub)
			}
		case []any:
			for i, sub := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), sub)
			}
		}
	}
	walk("config", config)
	if services, _ := config["service"].(map[string]any); !slices.Contains(services["extensions"].([]any), any("log_storage")) {
		t.Errorf("%s: service.extensions does not list log_storage", what)
	}
}

// defaultLogStorage is log_storage's directory and file_storage_directory
// in the embedded default rendered with --data-dir=dataDir.
func defaultLogStorage(t *testing.T) map[string]string {
	t.Helper()
	var doc struct {
		Extensions struct {
			LogStorage map[string]any `json:"log_storage"`
		} `json:"extensions"`
	}
	if err := yaml.Unmarshal([]byte(defaultConfigOf(t, "the embedded default", []string{"run", "--data-dir=" + dataDir})), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, key := range []string{"directory", "file_storage_directory"} {
		out[key], _ = doc.Extensions.LogStorage[key].(string)
		if out[key] == "" {
			t.Fatalf("the embedded default's log_storage has no %s", key)
		}
	}
	return out
}

func TestHelmValues(t *testing.T) {
	v := readChartValues(t)
	if v.Mode != "statefulset" || v.ReplicaCount != 1 {
		t.Errorf("mode %q with %d replicas; want one statefulset replica", v.Mode, v.ReplicaCount)
	}
	if command, _ := chartContainer(v); !slices.Equal(command, imageEntrypoint(t)) {
		t.Errorf("the chart runs %q, the image's entrypoint is %q", command, imageEntrypoint(t))
	}
	if u := v.PodSecurityContext.RunAsUser; u == nil || *u != 10001 {
		t.Error("podSecurityContext must run as the image's user 10001")
	}
	checkDataVolume(t, "helm/values.yaml", v.Statefulset.VolumeClaimTemplates, v.ExtraVolumeMounts, v.AlternateConfig)
	for _, p := range []string{"jaeger-compact", "jaeger-thrift", "jaeger-grpc", "zipkin"} {
		if v.Ports[p].Enabled {
			t.Errorf("port %s is enabled: doubletake has no such receiver", p)
		}
	}
	validateConfig(t, "helm/values.yaml alternateConfig", toYAML(t, v.AlternateConfig))
}

func TestOperatorCollector(t *testing.T) {
	c := readOperatorCollector(t)
	if c.APIVersion != "opentelemetry.io/v1beta1" || c.Kind != "OpenTelemetryCollector" {
		t.Errorf("%s %s, want opentelemetry.io/v1beta1 OpenTelemetryCollector", c.APIVersion, c.Kind)
	}
	if c.Spec.Mode != "statefulset" || c.Spec.Replicas == nil || *c.Spec.Replicas != 1 {
		t.Error("want mode statefulset with one replica")
	}
	if u := c.Spec.PodSecurityContext.RunAsUser; u == nil || *u != 10001 {
		t.Error("podSecurityContext must run as the image's user 10001")
	}
	checkDataVolume(t, "operator/collector.yaml", c.Spec.VolumeClaimTemplates, c.Spec.VolumeMounts, c.Spec.Config)
	// One gateway config, whichever installs it.
	if v := readChartValues(t); !reflect.DeepEqual(c.Spec.Config, v.AlternateConfig) {
		t.Errorf("operator/collector.yaml's config differs from helm/values.yaml's alternateConfig:\n%s\n---\n%s", toYAML(t, c.Spec.Config), toYAML(t, v.AlternateConfig))
	}
	for _, e := range c.Spec.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef == nil {
			t.Errorf("env %s: only the downward API's fieldRef is expected", e.Name)
		}
	}
	validateConfig(t, "operator/collector.yaml config", toYAML(t, c.Spec.Config))
}

// imageEntrypoint is the Containerfile's ENTRYPOINT.
func imageEntrypoint(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Containerfile has no ENTRYPOINT [...]")
	}
	var ep []string
	if err := yaml.Unmarshal(m[1], &ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

// prometheusRule mirrors the monitoring.coreos.com/v1 PrometheusRule fields
// kubernetes/prometheusrule.yaml sets.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec ruleFile `json:"spec"`
}

// ruleFile is a Prometheus rule file, the PrometheusRule's spec.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

const prometheusRuleHeader = `# The alert rules of prometheus/doubletake-rules.yaml as a PrometheusRule for
# the Prometheus Operator. Generated: go test ./deploy/ -run TestPrometheusRule -update
# rewrites it from the rules file; the test fails when the two differ.
`

// TestPrometheusRule: kubernetes/prometheusrule.yaml holds exactly the
// rules of prometheus/doubletake-rules.yaml (generated from it with
// -update), decoded strictly.
func TestPrometheusRule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("prometheus", "doubletake-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatalf("prometheus/doubletake-rules.yaml: %v", err)
	}
	var want prometheusRule
	want.APIVersion, want.Kind = "monitoring.coreos.com/v1", "PrometheusRule"
	want.Metadata.Name = "doubletake"
	want.Metadata.Labels = map[string]string{"app.kubernetes.io/name": "doubletake"}
	want.Spec = rules
	file := filepath.Join("kubernetes", "prometheusrule.yaml")
	if *update {
		out, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, append([]byte(prometheusRuleHeader), out...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var have prometheusRule
	if err := yaml.UnmarshalStrict(got, &have); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("%s differs from prometheus/doubletake-rules.yaml; regenerate it: go test ./deploy/ -run TestPrometheusRule -update", file)
	}
	if len(have.Spec.Groups) == 0 || len(have.Spec.Groups[0].Rules) == 0 {
		t.Error("the PrometheusRule holds no rules")
	}
}

// TestSystemdUnit: systemd-analyze accepts the unit, its state directory
// is the data dir ExecStart names, and the config ExecStart runs validates.
func TestSystemdUnit(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "Debian package systemd")
	b, err := os.ReadFile(filepath.Join("systemd", "doubletake.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	m := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("no ExecStart=BINARY ARGS line")
	}
	args := strings.Fields(m[2])
	if !strings.Contains(unit, "\nStateDirectory=doubletake\n") || !slices.Contains(args, "--data-dir="+dataDir) {
		t.Errorf("StateDirectory=doubletake is %s; ExecStart must name it as --data-dir", dataDir)
	}
	validateConfig(t, "systemd ExecStart", defaultConfigOf(t, "systemd ExecStart", args))

	// systemd-analyze checks that ExecStart's binary exists: point it at
	// this test's own executable, in a copy of the unit.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "doubletake.service")
	if err := os.WriteFile(copyPath, []byte(strings.Replace(unit, "ExecStart="+m[1], "ExecStart="+self, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
