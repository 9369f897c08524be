import util
