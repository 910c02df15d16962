module github.com/weighstation/weighstation/load-tests

go 1.26.0

require github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
