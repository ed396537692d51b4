package main

import (
	"fmt"

	wr "wasm-reconciler.dev/go/sdk"
)

// ContentHashAnnotation is the pod-template annotation carrying the
// content hash: changing the content changes the template, which rolls
// the Deployment.
const ContentHashAnnotation = "static-site.examples.wasm-reconciler.dev/content-hash"

// htmlDir is where nginx serves files from.
const htmlDir = "/usr/share/nginx/html"

// Reconcile serves the files of a StaticSite parent with a ConfigMap, a
// Deployment and a Service.
func Reconcile(req *wr.Request) (*wr.Response, error) {
	name, err := req.Name()
	if err != nil {
		return nil, err
	}
	namespace := req.Namespace()
	site, err := ParseSpec(req.Parent)
	if err != nil {
		return nil, err
	}
	config, err := ParseConfig(req.Config)
	if err != nil {
		return nil, err
	}
	hash := site.ContentHash()

	labels := func() *wr.Object {
		return wr.NewObject(
			"app.kubernetes.io/name", "static-site",
			"app.kubernetes.io/instance", name,
			"app.kubernetes.io/managed-by", "wasm-reconciler",
		)
	}
	selector := func() *wr.Object {
		return wr.NewObject("app.kubernetes.io/name", "static-site", "app.kubernetes.io/instance", name)
	}
	contentName := wr.ChildName(name, "content")
	appName := wr.ChildName(name, "")

	configMap := wr.NewK8sObject("v1", "ConfigMap", namespace, contentName)
	wr.Get(configMap, "metadata").(*wr.Object).Set("labels", labels())
	wr.Annotate(configMap, ContentHashAnnotation, hash)
	data := wr.NewObject()
	for _, f := range site.Content {
		data.Set(f.Name, f.Body)
	}
	configMap.Set("data", data)

	deployment := wr.NewK8sObject("apps/v1", "Deployment", namespace, appName)
	wr.Get(deployment, "metadata").(*wr.Object).Set("labels", labels())
	deployment.Set("spec", wr.NewObject(
		"replicas", site.Replicas,
		"selector", wr.NewObject("matchLabels", selector()),
		"template", wr.NewObject(
			"metadata", wr.NewObject(
				"labels", labels(),
				"annotations", wr.NewObject(ContentHashAnnotation, hash),
			),
			"spec", wr.NewObject(
				"containers", []any{wr.NewObject(
					"name", "web",
					"image", site.Image,
					"ports", []any{wr.NewObject("name", "http", "containerPort", site.Port)},
					"volumeMounts", []any{wr.NewObject("name", "content", "mountPath", htmlDir, "readOnly", true)},
				)},
				"volumes", []any{wr.NewObject("name", "content", "configMap", wr.NewObject("name", contentName))},
			),
		),
	))

	service := wr.NewK8sObject("v1", "Service", namespace, appName)
	wr.Get(service, "metadata").(*wr.Object).Set("labels", labels())
	service.Set("spec", wr.NewObject(
		"selector", selector(),
		"ports", []any{wr.NewObject("name", "http", "port", site.Port, "targetPort", "http")},
	))

	available, observed := observedAvailable(req, appName)
	resp := wr.NewResponse().
		Child(configMap).
		Child(deployment).
		Child(service).
		Condition(availability(available, observed, site.Replicas)).
		SetStatus(wr.NewObject(
			"url", siteURL(name, namespace, config.ClusterDomain, site.Port),
			"contentHash", hash,
			"replicas", site.Replicas,
			"availableReplicas", available,
		))
	if previous, ok := wr.AnnotationOf(req.Child("ConfigMap", contentName), ContentHashAnnotation); ok && previous != hash {
		resp.Event(wr.NormalEvent("ContentChanged", "content changed, rolling Deployment "+appName))
	}
	return resp, nil
}

// observedAvailable is status.availableReplicas of the observed Deployment
// (0 when absent or not an integer); observed is false when the Deployment
// has not been observed yet.
func observedAvailable(req *wr.Request, deploymentName string) (available int64, observed bool) {
	deployment := req.Child("Deployment", deploymentName)
	if deployment == nil {
		return 0, false
	}
	n, _ := wr.AsI64(wr.Get(wr.Get(deployment, "status"), "availableReplicas"))
	return n, true
}

func availability(available int64, observed bool, replicas int64) wr.Condition {
	switch {
	case !observed:
		return wr.ConditionUnknown("Available", "DeploymentPending", "the Deployment has not been observed yet")
	case replicas == 0:
		return wr.ConditionTrue("Available", "ScaledToZero", "0 replicas requested")
	case available >= replicas:
		return wr.ConditionTrue("Available", "ReplicasAvailable", fmt.Sprintf("%d/%d replicas available", available, replicas))
	default:
		return wr.ConditionFalse("Available", "ReplicasUnavailable", fmt.Sprintf("%d/%d replicas available", available, replicas))
	}
}

func siteURL(name, namespace, domain string, port int64) string {
	host := name + ".svc." + domain
	if namespace != "" {
		host = name + "." + namespace + ".svc." + domain
	}
	if port == 80 {
		return "http://" + host + "/"
	}
	return fmt.Sprintf("http://%s:%d/", host, port)
}
