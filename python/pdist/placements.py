"""ProcessMesh and placements, with Paddle's names: pdist.ProcessMesh([[0, 1], [2, 3]],
dim_names=["dp", "mp"]), pdist.Shard(1), pdist.Replicate(), pdist.Partial()."""


class ProcessMesh:
    """A logical grid of processes. `mesh` is a nested list of process ids (Paddle's form) or,
    with `shape`, left out: ids 0..n-1 in row-major order."""

    def __init__(self, mesh=None, dim_names=None, shape=None):
        if mesh is None and shape is None:
            raise ValueError("ProcessMesh needs the nested list of process ids or a shape")
        if mesh is not None:
            shape, ids = _shape_and_ids(mesh)
            if ids != list(range(len(ids))):
                raise ValueError(f"ProcessMesh: process ids {ids} must be 0..{len(ids) - 1} in row-major order "
                                 "(the C API numbers a mesh's processes itself)")
        self.shape = [int(d) for d in shape]
        if any(d < 1 for d in self.shape):
            raise ValueError(f"ProcessMesh: every dim must be >= 1, got shape {self.shape}")
        self.dim_names = list(dim_names) if dim_names is not None else [f"d{i}" for i in range(len(self.shape))]
        if not all(isinstance(name, str) for name in self.dim_names):
            raise TypeError(f"ProcessMesh: dim_names must be str, got {self.dim_names}")
        if len(self.dim_names) != len(self.shape):
            raise ValueError(f"ProcessMesh: {len(self.dim_names)} dim_names for a {len(self.shape)}-d mesh")

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"ProcessMesh(shape={self.shape}, dim_names={self.dim_names})"


def _shape_and_ids(mesh):
    if not isinstance(mesh, (list, tuple)):
        return [], [int(mesh)]
    parts = [_shape_and_ids(m) for m in mesh]
    inner = parts[0][0] if parts else []
    if any(p[0] != inner for p in parts):
        raise ValueError(f"ProcessMesh: ragged nested list {mesh}")
    return [len(mesh)] + inner, [i for p in parts for i in p[1]]


class Placement:
    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __repr__(self):
        return str(self)


class Shard(Placement):
    def __init__(self, dim):
        self.dim = int(dim)

    def __str__(self):
        return f"Shard({self.dim})"


class Replicate(Placement):
    def __str__(self):
        return "Replicate()"


class Partial(Placement):
    def __init__(self, reduce_type="sum"):
        if reduce_type not in ("sum", "avg", "max"):
            raise ValueError(f"Partial: reduce_type must be sum, avg or max, got {reduce_type!r}")
        self.reduce_type = reduce_type

    def __str__(self):
        return f"Partial({self.reduce_type})"
