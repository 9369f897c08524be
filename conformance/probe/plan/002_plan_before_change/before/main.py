import utils
