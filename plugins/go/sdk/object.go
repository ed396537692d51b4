package wr

// Helpers over Kubernetes objects held as parsed JSON (*Object).

// NewK8sObject returns an object with apiVersion, kind and metadata (name,
// and namespace when not ""). Add the rest with Set.
func NewK8sObject(apiVersion, kind, namespace, name string) *Object {
	metadata := NewObject("name", name)
	if namespace != "" {
		metadata.Set("namespace", namespace)
	}
	return NewObject("apiVersion", apiVersion, "kind", kind, "metadata", metadata)
}

// Kind returns obj.kind, if it is a string.
func Kind(obj any) (string, bool) { return GetString(obj, "kind") }

// APIVersion returns obj.apiVersion, if it is a string.
func APIVersion(obj any) (string, bool) { return GetString(obj, "apiVersion") }

// Name returns obj.metadata.name, if it is a string.
func Name(obj any) (string, bool) { return GetString(Get(obj, "metadata"), "name") }

// Namespace returns obj.metadata.namespace, if it is a string.
func Namespace(obj any) (string, bool) { return GetString(Get(obj, "metadata"), "namespace") }

// Generation returns obj.metadata.generation, if it is an integer.
func Generation(obj any) (int64, bool) { return AsI64(Get(Get(obj, "metadata"), "generation")) }

// LabelOf returns obj.metadata.labels[key], if it is a string.
func LabelOf(obj any, key string) (string, bool) {
	return GetString(Get(Get(obj, "metadata"), "labels"), key)
}

// AnnotationOf returns obj.metadata.annotations[key], if it is a string.
func AnnotationOf(obj any, key string) (string, bool) {
	return GetString(Get(Get(obj, "metadata"), "annotations"), key)
}

// Label sets obj.metadata.labels[key] = value, creating maps as needed.
func Label(obj *Object, key, value string) { setMetaMap(obj, "labels", key, value) }

// Annotate sets obj.metadata.annotations[key] = value, creating maps as needed.
func Annotate(obj *Object, key, value string) { setMetaMap(obj, "annotations", key, value) }

func setMetaMap(obj *Object, field, key, value string) {
	if obj == nil {
		return
	}
	meta, ok := Get(obj, "metadata").(*Object)
	if !ok {
		meta = NewObject()
		obj.Set("metadata", meta)
	}
	entries, ok := Get(meta, field).(*Object)
	if !ok {
		entries = NewObject()
		meta.Set(field, entries)
	}
	entries.Set(key, value)
}

// Find returns the object of kind named name in objects (e.g. observed
// children), or nil.
func Find(objects []any, kind, name string) *Object {
	for _, o := range objects {
		k, _ := Kind(o)
		n, _ := Name(o)
		if k == kind && n == name {
			if obj, ok := o.(*Object); ok {
				return obj
			}
		}
	}
	return nil
}
