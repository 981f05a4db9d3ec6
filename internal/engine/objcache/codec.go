package objcache

import (
	"bytes"
	"compress/flate"
	"io"
	"sync"
)

// DictCodec compresses short documents against a preset dictionary: an earlier document of the
// same sort, whose field names and values they mostly repeat, so a few hundred bytes of JSON
// shrink to tens. The caches keep the content of each object with one (compact.go), the
// engine's render memo each resource's last render. The dictionary never changes, so what was
// compressed with it can always be read. It is safe for concurrent use.
type DictCodec struct {
	dict    []byte
	writers sync.Pool // *flate.Writer with dict
	readers sync.Pool // io.ReadCloser (flate.Resetter)
}

// NewDictCodec is a codec with dict as its dictionary; dict must not change afterwards.
func NewDictCodec(dict []byte) *DictCodec { return &DictCodec{dict: dict} }

// Deflate compresses data against the dictionary.
func (c *DictCodec) Deflate(data []byte) ([]byte, error) {
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

// Inflate reads what Deflate compressed.
func (c *DictCodec) Inflate(packed []byte) ([]byte, error) {
	r, _ := c.readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReaderDict(bytes.NewReader(packed), c.dict)
	} else if err := r.(flate.Resetter).Reset(bytes.NewReader(packed), c.dict); err != nil {
		return nil, err
	}
	defer c.readers.Put(r)
	return io.ReadAll(r)
}
