package envoytest

import "google.golang.org/protobuf/encoding/protojson"

var protojsonUnmarshal = protojson.Unmarshal
