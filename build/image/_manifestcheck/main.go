// Command manifestcheck checks the deployment manifests under images/deploy against the
// Kubernetes API of the patched tree. It is compiled inside the patched tree (the directory
// name starts with "_" so that this repo's own go commands skip it):
//
//	cd _output/src/v1.36.3/patched && go run /path/to/build/image/_manifestcheck/main.go -dir DIR -out OUT
//
// For every YAML document under DIR:
//   - Kubernetes objects are validated against the tag's OpenAPI schema (-openapi, the tree's
//     api/openapi-spec/swagger.json), with the structured-merge-diff type checker that the API
//     server's server-side apply uses (k8s.io/apimachinery/pkg/util/managedfields): unknown
//     fields and wrongly typed values are errors;
//   - they are also decoded strictly (unknown or duplicate fields are errors) with
//     client-go's scheme;
//   - a DaemonSet is also applied, as a strategic-merge patch, to a kube-proxy DaemonSet like the
//     ones clusters run, and the result validated against the schema and decoded strictly again;
//   - a ConfigMap value that holds a KubeProxyConfiguration is decoded strictly with kube-proxy's
//     own config scheme (the patched one, which knows the ruleSync section) and validated with
//     kube-proxy's validation; it is also written to OUT/<file>.<key>.yaml, so that the caller
//     can load it with the built binaries;
//   - a kustomization is decoded strictly into the fields it may use, and its patch files must
//     exist;
//   - every container image is pinned by digest: NAME@sha256:HEX itself, or a bare NAME that the
//     kustomization of its directory pins with "digest: sha256:HEX" (and no newTag). The
//     manifests hold the placeholder sha256:IMAGE_DIGEST_FROM_make_image where the operator puts
//     the digest `make image` printed; -digest replaces it, as the operator would, before the
//     check.
//
// DIR/monitoring (Prometheus rules) is skipped: build/check-monitoring.sh checks it.
//
// It prints one line per document and exits 1 if any check failed.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	"k8s.io/kubernetes/pkg/proxy/apis/config/validation"
	"sigs.k8s.io/yaml"
)

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Patches    []struct {
		Path   string `json:"path,omitempty"`
		Patch  string `json:"patch,omitempty"`
		Target *struct {
			Kind string `json:"kind,omitempty"`
			Name string `json:"name,omitempty"`
		} `json:"target,omitempty"`
	} `json:"patches,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// A kube-proxy DaemonSet as clusters run it, for patches to apply to.
const baseDaemonSet = `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, labels: {k8s-app: kube-proxy}}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      serviceAccountName: kube-proxy
      containers:
      - name: kube-proxy
        image: registry.k8s.io/kube-proxy:v1.36.3
        command: [kube-proxy, --v=2, --config=/var/lib/kube-proxy-config/config, --hostname-override=$(NODE_NAME)]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {apiVersion: v1, fieldPath: spec.nodeName}}
        securityContext: {privileged: true}
        volumeMounts:
        - {name: config, mountPath: /var/lib/kube-proxy-config/}
        - {name: kubeconfig, mountPath: /var/lib/kube-proxy/}
        - {name: xtables-lock, mountPath: /run/xtables.lock}
        - {name: lib-modules, mountPath: /lib/modules, readOnly: true}
      volumes:
      - {name: config, configMap: {name: kube-proxy-config}}
      - {name: kubeconfig, configMap: {name: kube-proxy}}
      - {name: xtables-lock, hostPath: {path: /run/xtables.lock, type: FileOrCreate}}
      - {name: lib-modules, hostPath: {path: /lib/modules}}
`

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// placeholder stands, in the committed manifests, for the digest `make image` prints.
const placeholder = "sha256:IMAGE_DIGEST_FROM_make_image"

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	pinnedRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._/:-]*@(sha256:[0-9a-f]{64})$`)
	bareRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._/-]*$`) // no tag, no digest
)

// imageRef is a container image reference found in a manifest.
type imageRef struct{ where, dir, ref string }

func main() {
	dir := flag.String("dir", "images/deploy", "the manifests")
	out := flag.String("out", "", "where to write the KubeProxyConfigurations found")
	openapi := flag.String("openapi", "api/openapi-spec/swagger.json", "the tag's OpenAPI v2 document")
	digest := flag.String("digest", "", "the image digest (sha256:HEX) that replaces "+placeholder)
	flag.Parse()
	if *digest != "" && !digestRE.MatchString(*digest) {
		fmt.Fprintf(os.Stderr, "manifestcheck: -digest %q is not sha256:<64 hex digits>\n", *digest)
		os.Exit(2)
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "manifestcheck: -out is required")
		os.Exit(2)
	}
	tc, err := schemaConverter(*openapi)
	if err != nil {
		fmt.Fprintf(os.Stderr, "manifestcheck: the OpenAPI schema %s: %v\n", *openapi, err)
		os.Exit(2)
	}
	strict := serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

	var files []string
	filepath.Walk(*dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() && p == filepath.Join(*dir, "monitoring") {
			// Prometheus rule files, not Kubernetes objects (and a PrometheusRule, whose CRD
			// client-go's scheme lacks): build/check-monitoring.sh checks them with promtool.
			fmt.Println("skip monitoring/ (Prometheus rules: build/check-monitoring.sh checks them with promtool)")
			return filepath.SkipDir
		}
		if err == nil && !info.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	var refs []imageRef
	pins := map[string]map[string]string{} // directory -> image name -> the kustomization's digest
	failed := 0
	fail := func(format string, a ...any) {
		failed++
		fmt.Printf("FAIL "+format+"\n", a...)
	}
	if len(files) == 0 {
		fail("no YAML files under %s", *dir)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fail("%s: %v", f, err)
			continue
		}
		if *digest != "" {
			data = bytes.ReplaceAll(data, []byte(placeholder), []byte(*digest))
		}
		rel, _ := filepath.Rel(*dir, f)
		for i, doc := range docSep.Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			where := fmt.Sprintf("%s#%d", rel, i)
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				fail("%s: not YAML: %v", where, err)
				continue
			}
			if head.Kind == "Kustomization" {
				var k kustomization
				if err := yaml.UnmarshalStrict([]byte(doc), &k); err != nil {
					fail("%s: Kustomization: %v", where, err)
					continue
				}
				for _, p := range k.Patches {
					if p.Path != "" {
						if _, err := os.Stat(filepath.Join(filepath.Dir(f), p.Path)); err != nil {
							fail("%s: patch %s: %v", where, p.Path, err)
						}
					}
				}
				for _, im := range k.Images {
					if pins[filepath.Dir(f)] == nil {
						pins[filepath.Dir(f)] = map[string]string{}
					}
					if im.NewTag != "" {
						fail("%s: images %s sets newTag %s; pin it by digest only", where, im.Name, im.NewTag)
						continue
					}
					pins[filepath.Dir(f)][im.Name] = im.Digest
				}
				fmt.Printf("ok   %s Kustomization (%d patches)\n", where, len(k.Patches))
				continue
			}
			if err := checkSchema(tc, []byte(doc)); err != nil {
				fail("%s: against the OpenAPI schema: %v", where, err)
				continue
			}
			obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				fail("%s: %v", where, err)
				continue
			}
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				for key, val := range o.Data {
					if !strings.Contains(val, "kind: KubeProxyConfiguration") {
						continue
					}
					if err := checkKubeProxyConfig([]byte(val)); err != nil {
						fail("%s: ConfigMap %s key %s: %v", where, o.Name, key, err)
						continue
					}
					name := strings.NewReplacer("/", "_").Replace(rel) + "." + key + ".yaml"
					if err := os.WriteFile(filepath.Join(*out, name), []byte(val), 0o644); err != nil {
						fail("%s: %v", where, err)
					}
					fmt.Printf("ok   %s ConfigMap %s: %s is a valid KubeProxyConfiguration (strict)\n", where, o.Name, key)
				}
			case *appsv1.DaemonSet:
				for _, c := range append(o.Spec.Template.Spec.InitContainers, o.Spec.Template.Spec.Containers...) {
					refs = append(refs, imageRef{where: where + " container " + c.Name, dir: filepath.Dir(f), ref: c.Image})
				}
				if err := checkPatch([]byte(doc), strict, tc); err != nil {
					fail("%s: DaemonSet %s as a patch: %v", where, o.Name, err)
					continue
				}
			}
			fmt.Printf("ok   %s %s %s (OpenAPI schema and strict decoding)\n", where, gvk.Kind, objName(obj))
		}
	}
	for _, r := range refs {
		if m := pinnedRE.FindStringSubmatch(r.ref); m != nil {
			fmt.Printf("ok   %s: image pinned by digest %s\n", r.where, m[1])
			continue
		}
		d, ok := pins[r.dir][r.ref]
		switch {
		case ok && bareRE.MatchString(r.ref) && digestRE.MatchString(d):
			fmt.Printf("ok   %s: image %s pinned by digest %s in the kustomization\n", r.where, r.ref, d)
		case ok && bareRE.MatchString(r.ref):
			fail("%s: the kustomization pins %s by %q, not sha256:<64 hex digits>", r.where, r.ref, d)
		default:
			fail("%s: image %q is not pinned by a digest (NAME@sha256:HEX, or a kustomization images entry with digest)", r.where, r.ref)
		}
	}
	if failed > 0 {
		fmt.Printf("%d check(s) failed\n", failed)
		os.Exit(1)
	}
}

func objName(o runtime.Object) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// checkKubeProxyConfig decodes with kube-proxy's strict codec and validates.
func checkKubeProxyConfig(data []byte) error {
	obj, _, err := proxyconfigscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	cfg, ok := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	if !ok {
		return fmt.Errorf("decoded a %T", obj)
	}
	if errs := validation.Validate(cfg); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// checkPatch applies a DaemonSet patch to baseDaemonSet and decodes the result strictly.
func checkPatch(patchYAML []byte, strict runtime.Decoder, tc managedfields.TypeConverter) error {
	base, err := yaml.YAMLToJSON([]byte(baseDaemonSet))
	if err != nil {
		return err
	}
	patch, err := yaml.YAMLToJSON(patchYAML)
	if err != nil {
		return err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, patch, appsv1.DaemonSet{})
	if err != nil {
		return err
	}
	if err := checkSchema(tc, merged); err != nil {
		return fmt.Errorf("the patched DaemonSet, against the OpenAPI schema: %w", err)
	}
	obj, _, err := strict.Decode(merged, nil, nil)
	if err != nil {
		return fmt.Errorf("the patched DaemonSet: %w", err)
	}
	ds := obj.(*appsv1.DaemonSet)
	var want, got string
	var p appsv1.DaemonSet
	yaml.Unmarshal(patchYAML, &p)
	for _, c := range p.Spec.Template.Spec.Containers {
		if c.Name == "kube-proxy" {
			want = c.Image
		}
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "kube-proxy" {
			got = c.Image
		}
	}
	if len(ds.Spec.Template.Spec.Containers) != 1 || want == "" || got != want {
		return fmt.Errorf("after the patch: %d containers, kube-proxy image %q (the patch sets %q)", len(ds.Spec.Template.Spec.Containers), got, want)
	}
	if !bytes.Contains(merged, []byte("/lib/modules")) {
		return fmt.Errorf("the patch dropped the DaemonSet's volumes")
	}
	return nil
}

// schemaConverter reads an OpenAPI v2 document (api/openapi-spec/swagger.json of the tag) and
// returns the type checker that the API server's server-side apply builds from it.
func schemaConverter(path string) (managedfields.TypeConverter, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sw spec.Swagger
	if err := json.Unmarshal(b, &sw); err != nil {
		return nil, err
	}
	if len(sw.Definitions) == 0 {
		return nil, fmt.Errorf("no definitions")
	}
	defs := make(map[string]*spec.Schema, len(sw.Definitions))
	for k := range sw.Definitions {
		d := sw.Definitions[k]
		defs[k] = &d
	}
	return managedfields.NewTypeConverter(defs, false)
}

// checkSchema validates one object (YAML or JSON) against the schema of its apiVersion and kind.
func checkSchema(tc managedfields.TypeConverter, doc []byte) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(j, &u.Object); err != nil {
		return err
	}
	_, err = tc.ObjectToTyped(u)
	return err
}
