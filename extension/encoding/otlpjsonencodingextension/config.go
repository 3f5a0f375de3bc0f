package otlpjsonencodingextension

// Config has no settings: the encoding is OTLP JSON as pdata writes it,
// made valid UTF-8.
type Config struct{}
