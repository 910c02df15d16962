module github.com/weighstation/weighstation/tools/schemagen

go 1.26.0

require gopkg.in/yaml.v3 v3.0.1
