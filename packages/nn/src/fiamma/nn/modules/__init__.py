from fiamma.nn.modules.activation import *  # noqa: F401,F403
from fiamma.nn.modules.container import *  # noqa: F401,F403
from fiamma.nn.modules.dropout import *  # noqa: F401,F403
from fiamma.nn.modules.linear import *  # noqa: F401,F403
from fiamma.nn.modules.loss import *  # noqa: F401,F403
from fiamma.nn.modules.module import Module  # noqa: F401
from fiamma.nn.modules.rnn import *  # noqa: F401,F403
from fiamma.nn.modules.sparse import *  # noqa: F401,F403
