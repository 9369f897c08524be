from utils import f
