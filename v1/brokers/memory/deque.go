package memory

// deque is a ring buffer of tasks: a queue's pending list. Publish and
// recovery push at the back, Requeue at the front, Fetch pops the front.
type deque struct {
	buf  []*task
	head int // index of the front element in buf
	n    int // number of elements
}

func (d *deque) len() int { return d.n }

// at returns the i-th task from the front.
func (d *deque) at(i int) *task { return d.buf[(d.head+i)%len(d.buf)] }

func (d *deque) pushBack(t *task) {
	d.grow()
	d.buf[(d.head+d.n)%len(d.buf)] = t
	d.n++
}

func (d *deque) pushFront(t *task) {
	d.grow()
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = t
	d.n++
}

func (d *deque) popFront() *task {
	if d.n == 0 {
		return nil
	}
	t := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return t
}

// grow makes room for one more element.
func (d *deque) grow() {
	if d.n < len(d.buf) {
		return
	}
	buf := make([]*task, max(8, 2*len(d.buf)))
	for i := 0; i < d.n; i++ {
		buf[i] = d.at(i)
	}
	d.buf, d.head = buf, 0
}

// index returns t's place from the front, or -1. O(n).
func (d *deque) index(t *task) int {
	for i := 0; i < d.n; i++ {
		if d.at(i) == t {
			return i
		}
	}
	return -1
}

// remove takes t out, keeping the others' order, and reports whether it
// was there. O(n).
func (d *deque) remove(t *task) bool {
	if i := d.index(t); i >= 0 {
		for j := i; j < d.n-1; j++ {
			d.buf[(d.head+j)%len(d.buf)] = d.at(j + 1)
		}
		d.buf[(d.head+d.n-1)%len(d.buf)] = nil
		d.n--
		return true
	}
	return false
}
