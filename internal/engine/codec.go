package engine

import (
	"bytes"
	"compress/flate"
	"io"
	"sync"
)

// dictCodec compresses short documents against a preset dictionary: an earlier document of the
// same sort, whose field names and values they mostly repeat, so a few hundred bytes of JSON
// shrink to tens. The render memo keeps each resource's last render with one, the caches the
// content of each object (compact.go). The dictionary never changes, so what was compressed
// with it can always be read.
type dictCodec struct {
	dict    []byte
	writers sync.Pool // *flate.Writer with dict
	readers sync.Pool // io.ReadCloser (flate.Resetter)
}

func newDictCodec(dict []byte) *dictCodec { return &dictCodec{dict: dict} }

// deflate compresses data against the dictionary.
func (c *dictCodec) deflate(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, _ := c.writers.Get().(*flate.Writer)
	if w == nil {
		var err error
		if w, err = flate.NewWriterDict(&buf, flate.BestCompression, c.dict); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	defer c.writers.Put(w)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// inflate reads what deflate compressed.
func (c *dictCodec) inflate(packed []byte) ([]byte, error) {
	r, _ := c.readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReaderDict(bytes.NewReader(packed), c.dict)
	} else if err := r.(flate.Resetter).Reset(bytes.NewReader(packed), c.dict); err != nil {
		return nil, err
	}
	defer c.readers.Put(r)
	return io.ReadAll(r)
}
